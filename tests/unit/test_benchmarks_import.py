"""Every benchmark imports: they are run by hand, not by the suite, so a module moved inside ``tuner`` would
otherwise break them unseen (benchmarks/devices_pg18.py imported ``tuner.families.iouring`` for a whole session
after it moved to ``tuner.knobs``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_benchmark_module_imports() -> None:
    modules = sorted(p.stem for p in (ROOT / "benchmarks").glob("*.py"))
    assert len(modules) >= 10
    code = "import importlib, sys\nsys.path.insert(0, '.')\n" + "".join(
        f"importlib.import_module('benchmarks.{m}')\n" for m in modules)
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
