"""Headless Chromium for tests: a screenshot of a page and its DOM after rendering.

Each call starts its own browser (``--headless=new``, ``--no-sandbox``: tests run as root, where Chromium's sandbox
refuses to start) with a private, throw-away profile, in a process group of its own so that a browser that hangs
is ended with all its helpers — and nothing else — when the timeout passes.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

TIMEOUT_S = 120.0  # a loaded 2-core machine starts Chromium in seconds; this only bounds a hang


def binary() -> str | None:
    """The Chromium executable, or None when none is installed."""
    return next(filter(None, (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome"))), None)


def _url(path_or_url: str | Path) -> str:
    text = str(path_or_url)
    return text if "://" in text else Path(text).resolve().as_uri()


def _run(args: list[str], timeout_s: float) -> str:
    exe = binary()
    if exe is None:
        raise RuntimeError("no Chromium is installed (apt-get install chromium)")
    with tempfile.TemporaryDirectory(prefix="tuner-chromium-") as profile:
        proc = subprocess.Popen(
            [exe, "--headless=new", "--no-sandbox", f"--user-data-dir={profile}", "--disable-gpu",
             "--no-first-run", "--disable-extensions", "--hide-scrollbars", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise RuntimeError(f"Chromium did not finish within {timeout_s:.0f} s") from None
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if proc.returncode != 0:
            raise RuntimeError(f"Chromium exited {proc.returncode}: {err[-2000:]}")
        return out


def screenshot(path_or_url: str | Path, out_png: str | Path, width: int = 1280, height: int = 2000,
               timeout_s: float = TIMEOUT_S) -> Path:
    """A PNG of the page (a file or a URL) in a ``width`` x ``height`` window."""
    out = Path(out_png).resolve()
    _run([f"--window-size={width},{height}", f"--screenshot={out}", _url(path_or_url)], timeout_s)
    if not out.exists():
        raise RuntimeError(f"Chromium wrote no screenshot to {out}")
    return out


def dom(path_or_url: str | Path, width: int = 1280, timeout_s: float = TIMEOUT_S) -> str:
    """The document as Chromium has it after loading the page (``--dump-dom``): the DOM it rendered."""
    return _run([f"--window-size={width},2000", "--dump-dom", _url(path_or_url)], timeout_s)
