"""Write the synthetic check surfaces in this folder (run: python benchmarks/surfaces/checks/generate.py).

They are not measurements. They are shapes the shipped surfaces lack, so that an optimiser tuned on the
shipped ones is also judged on optima it was not given: every optimum here lies away from the default
policy's starting values (today's 1, then 0, 4, 32, 256 for effective_io_concurrency — a joint search starts
from 0, 32, 256 —; 128, 512, 2048 KiB for read_ahead_kb), or the shape is one the shipped surfaces lack (a
local optimum beside the global one, a readahead-only curve, throughput to maximise). See README.md.
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
    # A network volume that throttles queued requests: 2 is best, 1 close, every deeper queue slower.
    net = {0: 130, 1: 110, 2: 100, 4: 112, 8: 125, 16: 140, 32: 150, 64: 160, 128: 165, 256: 170}
    write("network-peak2", ["effective_io_concurrency"], [((e,), float(net[e]) * 20) for e in EIC])
    # Dense scans where prefetching only costs (DESIGN section 8): 0 best, 1 worst, the rest a shelf 1.5x slower.
    dense = {0: 100, 1: 240, 2: 180, 4: 160, 8: 152, 16: 150, 32: 150, 64: 151, 128: 153, 256: 155}
    write("dense-zero-best", ["effective_io_concurrency"], [((e,), float(dense[e]) * 10) for e in EIC])
    # Two basins: a local optimum at 2 (10 % off) and the global one at 128, with a hump between.
    bi = {0: 150, 1: 125, 2: 110, 4: 125, 8: 140, 16: 130, 32: 115, 64: 104, 128: 100, 256: 108}
    write("bimodal-2-128", ["effective_io_concurrency"], [((e,), float(bi[e]) * 5) for e in EIC])
    # Readahead alone, a sequential scan's MB/s (maximize), DESIGN section 8's shape: 0 starves, 512 peaks,
    # the largest windows fall back. The sweep here has only 6 levels.
    ra = {0: 60, 16: 300, 128: 900, 512: 1100, 2048: 1000, 8192: 700}
    write("readahead-seq-mbps-maximize", ["read_ahead_kb"], [((r,), float(ra[r])) for r in RA], "maximize")
    # Joint, eic dominant: 256 best at the kernel's readahead 128; 0 KiB readahead is a cliff.
    rows = []
    for e in EIC:
        for r in RA:
            eic_part = 1 + 1.5 / (1 + z(e))
            ra_part = 3.0 if r == 0 else 1 + 0.03 * abs(z(r) - z(128))
            rows.append(((e, r), 200 * eic_part * ra_part))
    write("joint-eic256-ra128", ["effective_io_concurrency", "read_ahead_kb"], rows)
    # Joint throughput (maximize), readahead dominant: 8192 KiB best, eic nearly irrelevant (within 2 %).
    rows = []
    for e in EIC:
        for r in RA:
            rows.append(((e, r), 1000 * (0.1 + 0.9 * z(r) / z(8192)) * (1 - 0.02 * abs(z(e) - z(8)) / 8)))
    write("joint-ra8192-maximize", ["effective_io_concurrency", "read_ahead_kb"], rows, "maximize")


if __name__ == "__main__":
    main()
