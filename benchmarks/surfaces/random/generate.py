"""Write random response surfaces (python benchmarks/surfaces/random/generate.py [--n 16] [--seed 2026] [--out DIR]).

The shipped surfaces are measurements and the check surfaces one folder over are shapes written by hand. Both
were in view while the optimiser was tuned, so neither says how it does on a surface nobody picked. These are
drawn at random from a family of I/O-like curves, with a fixed seed, and were not looked at before the first
benchmark run on them (docs/decisions.md, 2026-12-03). Same CSV format as every other surface.

1-D curves over effective_io_concurrency {0, 1, 2, 4, …, 256}, in z = log2(1 + eic), one of:

* **valley** — one optimum anywhere on z, the penalty growing as |z − z*|^p (p from 1 to 2: a V to a bowl),
  2 % to 40 % worse one unit of z away;
* **saturating** — time falls with z and levels off (or rises and levels off: prefetching that only costs),
  total effect 10 % to 2.5×;
* **two basins** — a valley plus a second, shallower dip elsewhere (3 % to 15 % worse than the optimum).

Every 1-D curve then gets, with probability 0.35, a separate value at 0 (prefetching off is another mechanism:
0.6× to 1.5× of what the curve would say), and a fixed ±2 % roughness per grid level (measured curves are not
smooth). A quarter are throughput (``maximize``: 1 / time, scaled). 2-D surfaces: a valley in each knob
(effective_io_concurrency × read_ahead_kb {0, 16, 128, 512, 2048, 8192}) with a random interaction and a
readahead-0 cliff of random height.
"""

from __future__ import annotations

import argparse
import csv
import math
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
EIC = [0, 1, 2, 4, 8, 16, 32, 64, 128, 256]
RA = [0, 16, 128, 512, 2048, 8192]


def z(v: float) -> float:
    return math.log2(1 + v)


def valley(rng: random.Random, lo: float, hi: float) -> tuple[float, float, float]:
    """(optimum z, steepness one unit away, exponent)."""
    return rng.uniform(lo, hi), rng.uniform(0.02, 0.40), rng.uniform(1.0, 2.0)


def curve_1d(rng: random.Random) -> tuple[str, list[float]]:
    kind = rng.choice(["valley", "valley", "saturating", "two-basins"])
    zs = [z(e) for e in EIC]
    if kind == "saturating":
        effect, scale = rng.uniform(0.1, 1.5), rng.uniform(0.7, 3.0)
        falling = rng.random() < 0.75
        shape = [math.exp(-x / scale) if falling else 1 - math.exp(-x / scale) for x in zs]
        values = [1 + effect * s for s in shape]
    else:
        at, steep, p = valley(rng, 0.0, z(256))
        values = [1 + steep * abs(x - at) ** p for x in zs]
        if kind == "two-basins":
            other = rng.uniform(0.0, z(256))
            while abs(other - at) < 2.5:
                other = rng.uniform(0.0, z(256))
            depth = 1 + rng.uniform(0.03, 0.15)  # the second dip's floor, relative to the optimum
            width = rng.uniform(0.5, 1.2)
            values = [min(v, depth * (1 + steep * (abs(x - other) / width) ** p)) for v, x in zip(values, zs)]
    if rng.random() < 0.35:
        values[0] *= rng.uniform(0.6, 1.5)
        kind += "+zero"
    values = [v * (1 + rng.uniform(-0.02, 0.02)) for v in values]
    return kind, values


def surface_2d(rng: random.Random) -> list[tuple[tuple[int, int], float]]:
    ae, se, pe = valley(rng, 0.0, z(256))
    ar, sr, pr = valley(rng, z(16), z(8192))
    inter = rng.uniform(-0.03, 0.03)
    cliff = rng.uniform(1.2, 3.0)
    rows = []
    for e in EIC:
        for r in RA:
            de, dr = z(e) - ae, z(r) - ar
            v = (1 + se * abs(de) ** pe / 4) * (1 + sr * abs(dr) ** pr / 4) + inter * de * dr
            v = max(v, 0.5) * (cliff if r == 0 else 1) * (1 + rng.uniform(-0.02, 0.02))
            rows.append(((e, r), v))
    return rows


def write(path: Path, knobs: list[str], rows: list[tuple[tuple[int, ...], float]], direction: str) -> None:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow([*knobs, "value", "direction"])
        for key, value in rows:
            w.writerow([*key, f"{value:.2f}", direction])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=16, help="1-D surfaces to write (default 16)")
    ap.add_argument("--n2d", type=int, default=3, help="2-D surfaces to write (default 3)")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--out", type=Path, default=HERE,
                    help="folder to write into (default: this one, whose r*.csv are replaced; elsewhere "
                         "files of the same names are overwritten and nothing else is touched)")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    out: Path = args.out
    if out.exists() and not out.is_dir():
        ap.error(f"--out {out} is a file; give a folder (it is created if missing)")
    out.mkdir(parents=True, exist_ok=True)
    if out.resolve() == HERE:
        for old in out.glob("r*.csv"):
            old.unlink()
    for i in range(args.n):
        kind, values = curve_1d(rng)
        base = rng.choice([100.0, 500.0, 2000.0])
        if rng.random() < 0.25:
            rows = [((e,), 1000.0 * base / (base * v)) for e, v in zip(EIC, values)]
            write(out / f"r{i:02d}-{kind}-maximize.csv", ["effective_io_concurrency"], rows, "maximize")
        else:
            rows = [((e,), base * v) for e, v in zip(EIC, values)]
            write(out / f"r{i:02d}-{kind}.csv", ["effective_io_concurrency"], rows, "minimize")
    for i in range(args.n2d):
        rows2 = [(k, 400.0 * v) for k, v in surface_2d(rng)]
        write(out / f"r2d{i:02d}.csv", ["effective_io_concurrency", "read_ahead_kb"], rows2, "minimize")


if __name__ == "__main__":
    main()
