"""The random and hold-out benchmark surfaces are what their generator writes from the seed their README names."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SURFACES = Path(__file__).resolve().parents[2] / "benchmarks" / "surfaces"
GENERATE = SURFACES / "random" / "generate.py"


@pytest.mark.parametrize(
    ("folder", "args", "prefix"),
    [
        ("random", ["--seed", "2026"], "r"),
        ("holdout-2d", ["--n", "0", "--n2d", "6", "--seed", "2027"], "h"),
        ("holdout-2d-b", ["--n", "0", "--n2d", "6", "--seed", "2034"], "hb"),
        ("holdout-1d", ["--n", "16", "--n2d", "0", "--seed", "2028"], "h1d"),
        ("holdout-1d-b", ["--n", "16", "--n2d", "0", "--seed", "2029"], "h1e"),
        ("holdout-1d-c", ["--n", "16", "--n2d", "0", "--seed", "2030"], "h1f"),
        ("holdout-1d-d", ["--n", "16", "--n2d", "0", "--seed", "2031"], "h1g"),
        ("holdout-1d-e", ["--n", "16", "--n2d", "0", "--seed", "2032"], "h1h"),
        ("holdout-1d-f", ["--n", "16", "--n2d", "0", "--seed", "2033"], "h1i"),
    ],
)
def test_shipped_surfaces_are_reproduced_by_their_generator(tmp_path: Path, folder: str, args: list[str],
                                                            prefix: str) -> None:
    subprocess.run([sys.executable, str(GENERATE), *args, "--out", str(tmp_path)], check=True)
    written = {prefix + p.name[1:]: p.read_text() for p in tmp_path.glob("r*.csv")}
    shipped = {p.name: p.read_text() for p in (SURFACES / folder).glob("*.csv")}
    assert written and written == shipped
