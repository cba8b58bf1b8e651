"""examples/systemd/tuner.service is a unit this machine's systemd accepts without a single warning about its own
lines: ``systemd-analyze verify`` on a copy whose ExecStart is the real ``tuner`` of this environment."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
UNIT = REPO / "examples" / "systemd" / "tuner.service"
EXEC_START = "ExecStart=/opt/tuner/bin/tuner daemon --config /etc/tuner/tuner.toml"

needs_verify = pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")


def verify(tmp_path: Path, text: str) -> list[str]:
    """Lines of ``systemd-analyze verify`` about the unit itself (it may also talk about other units it loads)."""
    tuner = Path(sys.executable).parent / "tuner"
    assert tuner.exists(), f"{tuner}: install the project into its environment (pip install -e .)"
    copy = tmp_path / "tuner.service"
    copy.write_text(text.replace(EXEC_START, f"ExecStart={tuner} daemon --config /etc/tuner/tuner.toml"))
    proc = subprocess.run(["systemd-analyze", "verify", str(copy)], capture_output=True, text=True, timeout=120)
    lines = (proc.stdout + proc.stderr).splitlines()
    ours = [line for line in lines if str(copy) in line or re.match(r"tuner\.service\b", line)]
    if proc.returncode != 0 and not ours:
        ours = lines or [f"systemd-analyze verify exited {proc.returncode}"]
    return ours


@needs_verify
def test_the_example_unit_verifies_without_warnings(tmp_path: Path) -> None:
    text = UNIT.read_text()
    assert EXEC_START in text
    assert verify(tmp_path, text) == []


@needs_verify
def test_verify_would_catch_a_mistake_in_the_unit(tmp_path: Path) -> None:
    """The filter above is not blind: a misspelt key and a type this systemd does not know are reported."""
    text = UNIT.read_text().replace("NotifyAccess=main", "NotifyAcces=main\nType=notify-sometimes")
    problems = verify(tmp_path, text)
    assert any("NotifyAcces" in line for line in problems), problems
    assert any("notify-sometimes" in line for line in problems), problems


def test_the_unit_says_what_the_daemon_relies_on() -> None:
    settings = dict(
        line.split("=", 1) for line in UNIT.read_text().splitlines() if re.match(r"[A-Z][A-Za-z]+=", line)
    )
    assert settings["Type"] in ("notify", "notify-reload")
    assert settings["NotifyAccess"] == "main"
    assert settings["KillMode"] == "mixed"
    assert settings["TimeoutStopSec"] == "45"  # the daemon exits within 30 s of SIGTERM
    assert settings["StateDirectory"] == "tuner"  # /var/lib/tuner, root's default [tuner] state_dir
    assert settings["ProtectKernelTunables"] == "no"  # it writes drop_caches and read_ahead_kb
    assert "ProcSubset" not in settings  # =pid would hide /proc/sys
    assert settings["RestrictAddressFamilies"].split() == ["AF_UNIX", "AF_INET", "AF_INET6"]


def test_execstart_is_where_the_documented_install_puts_tuner() -> None:
    """docs/daemon.md installs into a virtual environment; pip puts the project's console script ``tuner`` in its
    bin/ (tests/integration/test_wheel.py runs it from there): the unit starts that file, nothing else."""
    docs = (REPO / "docs" / "daemon.md").read_text()
    venv = re.search(r"^python3 -m venv (\S+) && \1/bin/pip install ", docs, re.MULTILINE)
    assert venv is not None, "docs/daemon.md: no 'python3 -m venv DIR && DIR/bin/pip install' line"
    exec_start = re.search(r"^ExecStart=(\S+) ", UNIT.read_text(), re.MULTILINE)
    assert exec_start is not None and exec_start.group(1) == f"{venv.group(1)}/bin/tuner"
    assert f"{venv.group(1)}/bin/tuner daemon --check-config" in docs
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts.get("tuner") == "tuner.cli:main"
