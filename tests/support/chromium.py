"""Headless Chromium for the tests: a screenshot of a page, its DOM after load, and a measurement taken in the page.

Debian's ``chromium`` package (``scripts/setup`` installs it as root when missing). Each call starts its own
browser with a private ``--user-data-dir``, in a process group of its own, and kills that group when the call
ends or times out — never another Chromium. As root Chromium refuses to start without ``--no-sandbox``
(https://chromium.googlesource.com/chromium/src/+/main/docs/linux/sandboxing.md). ``--headless=new`` is the
headless mode that is the real browser (https://developer.chrome.com/docs/chromium/headless): the viewport is
``--window-size``.

    screenshot("report.html", "out.png", width=1280, height=900)
    dom = dump_dom("report.html", width=1280)
    facts = measure("report.html", width=1280)   # scrollWidth, clientWidth, the SVGs' titles …
    distinct_colours("out.png")
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import struct
import subprocess
import tempfile
import zlib
from pathlib import Path
from typing import Any

TIMEOUT_S = 120.0  # a loaded 2-core machine can take tens of seconds to start a browser
CANDIDATES = ("chromium", "chromium-browser", "google-chrome")
MEASURE_ID = "tuner-measure"

# Runs after the page has loaded and writes what it found into the DOM, where --dump-dom shows it.
MEASURE_JS = """
window.addEventListener("load", () => {
  const d = document.documentElement;
  const svgs = [...document.querySelectorAll("svg")].map(s => ({
    id: s.id, cls: s.getAttribute("class") || "",
    title: (s.querySelector(":scope > title") || {}).textContent || "",
    width: s.getBoundingClientRect().width, right: s.getBoundingClientRect().right,
    top: s.getBoundingClientRect().top + window.scrollY, height: s.getBoundingClientRect().height,
    open: !s.closest("details") || s.closest("details").open}));
  const wide = [...document.querySelectorAll("body *")].filter(e => {
    const r = e.getBoundingClientRect(); return r.width > 0 && r.right > d.clientWidth + 0.5; })
    .slice(0, 20).map(e => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") +
                           (e.className && e.className.baseVal === undefined && e.className ? "." + e.className : ""));
  const first = [...document.querySelectorAll("body *")].filter(e => {
    const r = e.getBoundingClientRect(); return r.height > 0 && r.top < window.innerHeight; });
  const out = document.createElement("pre");
  out.id = "%s";
  out.textContent = JSON.stringify({
    innerWidth: window.innerWidth, innerHeight: window.innerHeight, clientWidth: d.clientWidth,
    scrollWidth: d.scrollWidth, bodyScrollWidth: document.body.scrollWidth, scrollHeight: d.scrollHeight,
    svgs: svgs, wide: wide, details: document.querySelectorAll("details").length,
    detailsOpen: document.querySelectorAll("details[open]").length,
    firstScreenIds: [...new Set(first.map(e => e.closest("section") && e.closest("section").id).filter(Boolean))]});
  out.style.display = "none";
  document.body.appendChild(out);
});
""" % MEASURE_ID


def binary() -> str | None:
    """The Chromium executable on PATH, or None."""
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


def _url(path_or_url: str | os.PathLike[str]) -> str:
    s = str(path_or_url)
    if "://" in s:
        return s
    return Path(s).resolve().as_uri()


def _run(args: list[str], *, width: int, height: int, timeout_s: float) -> subprocess.CompletedProcess[str]:
    exe = binary()
    if exe is None:
        raise FileNotFoundError("chromium is not installed (Debian: apt-get install chromium)")
    with tempfile.TemporaryDirectory(prefix="tuner-chromium-") as profile:
        cmd = [exe, "--headless=new", f"--user-data-dir={profile}", f"--window-size={width},{height}",
               "--disable-gpu", "--no-first-run", "--no-default-browser-check", "--disable-extensions",
               "--disable-background-networking", "--disable-dev-shm-usage", "--hide-scrollbars",
               "--force-device-scale-factor=1", "--virtual-time-budget=5000"]
        if os.geteuid() == 0:
            cmd.append("--no-sandbox")
        proc = subprocess.Popen([*cmd, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)  # its own process group: killed as one, and only it
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise TimeoutError(f"chromium did not finish within {timeout_s:g} s: {' '.join(args)}") from None
        finally:
            # Chromium's helpers (zygote, GPU, renderer) are in the same group; none may outlive the call.
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def screenshot(path_or_url: str | os.PathLike[str], out_png: str | os.PathLike[str], *, width: int = 1280,
               height: int = 900, timeout_s: float = TIMEOUT_S) -> Path:
    """A PNG of the page's first ``width`` x ``height`` CSS pixels (pass the page's scrollHeight for all of it)."""
    out = Path(out_png).resolve()
    out.unlink(missing_ok=True)
    res = _run([f"--screenshot={out}", _url(path_or_url)], width=width, height=height, timeout_s=timeout_s)
    if not out.is_file() or out.stat().st_size == 0:
        raise RuntimeError(f"chromium wrote no screenshot (exit {res.returncode}): {res.stderr[-2000:]}")
    return out


def dump_dom(path_or_url: str | os.PathLike[str], *, width: int = 1280, height: int = 900,
             timeout_s: float = TIMEOUT_S) -> str:
    """The page's DOM as Chromium serialises it after load (scripts in the page have run)."""
    res = _run(["--dump-dom", _url(path_or_url)], width=width, height=height, timeout_s=timeout_s)
    if res.returncode != 0 or "<html" not in res.stdout.lower():
        raise RuntimeError(f"chromium --dump-dom failed (exit {res.returncode}): {res.stderr[-2000:]}")
    return res.stdout


def measure(html_file: str | os.PathLike[str], *, width: int = 1280, height: int = 900,
            timeout_s: float = TIMEOUT_S) -> dict[str, Any]:
    """Lay the page out at ``width`` x ``height`` and return what :data:`MEASURE_JS` found: the viewport, the
    document's scrollWidth/clientWidth/scrollHeight, each SVG's id, class, title and width, the elements that
    reach past the right edge, the number of <details> (and open ones), and the sections on the first screen.

    The page is measured from a copy with the script injected before ``</body>``; the file itself is untouched."""
    html = Path(html_file).read_text(encoding="utf-8")
    tag = f"<script>{MEASURE_JS}</script>"
    at = html.lower().rfind("</body>")
    html = html[:at] + tag + html[at:] if at >= 0 else html + tag
    with tempfile.TemporaryDirectory(prefix="tuner-measure-") as d:
        page = Path(d) / "page.html"
        page.write_text(html, encoding="utf-8")
        dom = dump_dom(page, width=width, height=height, timeout_s=timeout_s)
    start = dom.find(f'id="{MEASURE_ID}"')
    if start < 0:
        raise RuntimeError("the measuring script left no result in the DOM (did the page load?)")
    body = dom[dom.index(">", start) + 1:dom.index("</pre>", start)]
    return json.loads(_unescape(body))


def _unescape(text: str) -> str:
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"').replace("&amp;", "&")


def png_pixels(png: str | os.PathLike[str]) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of raw pixel bytes) of an 8-bit, non-interlaced RGB or RGBA PNG — what Chromium
    writes — decoded with zlib alone (the PNG specification's filters, https://www.w3.org/TR/png/#9Filters)."""
    data = Path(png).read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{png} is not a PNG")
    pos, idat, width = 8, b"", 0
    height = depth = colour = interlace = 0
    while pos < len(data):
        (length,), kind = struct.unpack(">I", data[pos:pos + 4]), data[pos + 4:pos + 8]
        chunk = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat += chunk
        elif kind == b"IEND":
            break
    if depth != 8 or colour not in (2, 6) or interlace:
        raise ValueError(f"{png}: only 8-bit non-interlaced RGB/RGBA PNGs are decoded here")
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        ftype = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if ftype == 1:
                line[i] = (line[i] + a) & 0xFF
            elif ftype == 2:
                line[i] = (line[i] + b) & 0xFF
            elif ftype == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, [bytes(r if bpp == 3 else b"".join(r[i:i + 3] for i in range(0, stride, 4)))
                           for r in rows]


def distinct_colours(png: str | os.PathLike[str]) -> int:
    """How many different RGB colours the PNG's pixels have (a blank page has one)."""
    width, _, rows = png_pixels(png)
    seen: set[bytes] = set()
    for r in rows:
        seen.update(r[i:i + 3] for i in range(0, width * 3, 3))
    return len(seen)
