"""benchmarks/README.md names every benchmark script and every committed result file (issue #57 item 5): a result
nobody can trace to its script and its meaning is a file nobody can re-measure or trust. Names are read from the
README's backticked spans, ``{a,b}`` expanded (``measured/devices/{hdd,ram}.json``)."""

from __future__ import annotations

import itertools
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "benchmarks" / "README.md"


def _named() -> set[str]:
    names: set[str] = set()
    for span in re.findall(r"`([^`]+)`", README.read_text(encoding="utf-8")):
        parts = re.split(r"\{([^{}]*)\}", span)  # text, choices, text, choices, …
        choices = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
        names.update("".join(c) for c in itertools.product(*choices))
    return names


def test_the_readme_names_every_benchmark_script() -> None:
    named = _named()
    missing = [p.name for p in sorted((ROOT / "benchmarks").glob("*.py")) if p.name not in named]
    assert not missing, f"benchmarks/README.md does not describe {missing}"


def test_the_readme_names_every_committed_result_file() -> None:
    proc = subprocess.run(["git", "ls-files", "measured", "results", "surfaces/raw"], cwd=ROOT / "benchmarks",
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"not a git checkout: {proc.stderr.strip()}")
    files = [f for f in proc.stdout.splitlines() if not f.endswith(".gitignore")]
    assert len(files) >= 40
    named = _named()
    missing = [f for f in files if f not in named]
    assert not missing, f"benchmarks/README.md's table does not name {missing}"
