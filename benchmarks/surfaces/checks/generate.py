"""Write the synthetic check surfaces in this folder (run: python benchmarks/surfaces/checks/generate.py).

They are not measurements. They are shapes the shipped surfaces lack, so that an optimiser tuned on the
shipped ones is also judged on optima it was not given: every optimum here lies away from the default
policy's starting values (today's 1, then 0, 16, 256 for effective_io_concurrency; 128, 512, 2048 KiB for
read_ahead_kb), and one is a maximised throughput. See README.md for each shape's reason.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

HERE = Path(__file__).resolve().parent
EIC = [0, 1, 2, 4, 8, 16, 32, 64, 128, 256]
RA = [0, 16, 128, 512, 2048, 8192]


def z(v: float) -> float:
    return math.log2(1 + v)


def write(name: str, knobs: list[str], rows: list[tuple[tuple[int, ...], float]], direction: str = "minimize") -> None:
    with (HERE / f"{name}.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow([*knobs, "value", "direction"])
        for key, value in rows:
            w.writerow([*key, f"{value:.2f}", direction])


def main() -> None:
    # A sharp V at 48, a level between the powers of two: only 44-53 lie within 5 % of the optimum.
    levels = sorted(EIC + [48])
    write("vee48", ["effective_io_concurrency"],
          [((e,), 300 * (1 + 0.4 * abs(z(e) - z(48)))) for e in levels])
    # A smooth bowl around 32 (an SSD whose queue saturates): 21-48 lie within 5 %.
    write("bowl32", ["effective_io_concurrency"],
          [((e,), 100 * (1 + 0.08 * (z(e) - z(32)) ** 2)) for e in EIC])
    # A spinning-disk RAID: a little prefetch helps, more thrashes the heads; optimum at 4.
    hdd = {0: 100, 1: 90, 2: 70, 4: 60, 8: 63, 16: 70, 32: 80, 64: 90, 128: 95, 256: 100}
    write("hdd-raid-peak4", ["effective_io_concurrency"], [((e,), float(hdd[e]) * 10) for e in EIC])
    # Throughput (maximize) of a network volume peaking at 64 and falling off beyond.
    tps = {0: 200, 1: 210, 2: 300, 4: 420, 8: 600, 16: 800, 32: 950, 64: 1000, 128: 980, 256: 900}
    write("tps-peak64-maximize", ["effective_io_concurrency"], [((e,), float(tps[e])) for e in EIC], "maximize")
    # Joint, smooth, with an interaction: optimum at eic 64 x read_ahead_kb 2048 (no starting value in both).
    rows = []
    for e in EIC:
        for r in RA:
            ze, zr = z(e) - z(64), z(r) - z(2048)
            rows.append(((e, r), 400 * (1 + 0.04 * ze**2 + 0.05 * zr**2 + 0.015 * ze * zr)))
    write("joint-interior-64x2048", ["effective_io_concurrency", "read_ahead_kb"], rows)


if __name__ == "__main__":
    main()
