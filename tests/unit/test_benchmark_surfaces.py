"""The random, development and hold-out benchmark surfaces are what their generator writes from the seed their
README names; every drawn file belongs to one draw, and only the hold-out runs read the sealed set."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SURFACES = ROOT / "benchmarks" / "surfaces"
GENERATE = SURFACES / "random" / "generate.py"

# (folder, generator arguments, the prefix that replaces the generator's "r", the draw's file prefix)
DRAWS = [
    ("random", ["--seed", "2026"], "r", "r"),
    ("dev", ["--n", "0", "--n2d", "6", "--seed", "2027"], "h", "h2d"),
    ("dev", ["--n", "16", "--n2d", "0", "--seed", "2028"], "h1d", "h1d"),
    ("dev", ["--n", "16", "--n2d", "0", "--seed", "2029"], "h1e", "h1e"),
    ("dev", ["--n", "16", "--n2d", "0", "--seed", "2030"], "h1f", "h1f"),
    ("dev", ["--n", "16", "--n2d", "0", "--seed", "2031"], "h1g", "h1g"),
    ("dev", ["--n", "16", "--n2d", "0", "--seed", "2032"], "h1h", "h1h"),
    ("holdout", ["--n", "16", "--n2d", "0", "--seed", "2033"], "h1i", "h1i"),
    ("holdout", ["--n", "0", "--n2d", "6", "--seed", "2034"], "hb", "hb2d"),
]


@pytest.mark.parametrize(("folder", "args", "prefix", "draw"), DRAWS)
def test_shipped_surfaces_are_reproduced_by_their_generator(tmp_path: Path, folder: str, args: list[str],
                                                            prefix: str, draw: str) -> None:
    subprocess.run([sys.executable, str(GENERATE), *args, "--out", str(tmp_path)], check=True)
    written = {prefix + p.name[1:]: p.read_text() for p in tmp_path.glob("r*.csv")}
    shipped = {p.name: p.read_text() for p in (SURFACES / folder).glob(f"{draw}*.csv")}
    assert written and written == shipped


@pytest.mark.parametrize("folder", ["random", "dev", "holdout"])
def test_every_drawn_file_belongs_to_exactly_one_draw(folder: str) -> None:
    # A stray or renamed file would be run by a folder-wide glob but by no draw's run, or by two.
    prefixes = [draw for f, _, _, draw in DRAWS if f == folder]
    for path in (SURFACES / folder).glob("*.csv"):
        assert sum(path.name.startswith(p) for p in prefixes) == 1, path.name


def test_surface_names_are_unique_across_the_synthetic_sets() -> None:
    names = [p.stem for folder in ("checks", "random", "dev", "holdout") for p in (SURFACES / folder).glob("*.csv")]
    assert len(names) == len(set(names))


def test_only_the_holdout_runs_read_the_sealed_set() -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import regenerate

    for run in regenerate._runs():
        reads_sealed = any("surfaces/holdout/" in a for a in run.args)
        assert reads_sealed == run.name.startswith("holdout-"), run.name
