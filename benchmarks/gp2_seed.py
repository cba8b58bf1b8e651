"""The seed thread's gp2 experiment, reproduced on an emulated volume (issue 54, item 4).

The seed (pgsql-performance, "effective_io_concurrency on EBS/gp2", 2018; PostgreSQL 9.6 on a 100 GB gp2 volume,
``pgbench -s 1000``) ran, after ``drop_caches`` and a restart, at each eic::

    SET enable_indexscan = off;
    EXPLAIN (ANALYZE, BUFFERS) SELECT * FROM pgbench_accounts WHERE aid BETWEEN 1000 AND 10000000 AND abalance != 0;

a dense bitmap heap scan of the first tenth of the table (191,240 blocks read), and measured eic 0 in 40 s, eic 1
in 98 s and 2..256 in 52-55 s. This script runs the same query, its range scaled to the same tenth of a smaller
table, on a tuner sandbox whose loop device emulates ``--device`` (default the gp2-100g shorthand), at each
readahead × eic cell, cold (standby restarted, page cache emptied), in a fresh random order per block, after one
unscored warm-up probe; it writes the cells (median, mean, 95 % interval of the mean, raw values) and prints them
beside the seed's.

    python benchmarks/gp2_seed.py [--device gp2-100g] [--scale 20] [--repeats 3] [--ra 128] [--quick]

Run as root (a loop device, drop_caches, read_ahead_kb); everything it creates is removed on exit.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tuner import log  # noqa: E402
from tuner.probes.cache import drop_caches  # noqa: E402
from tuner.probes.explain import parse  # noqa: E402
from tuner.sandbox import Sandbox  # noqa: E402
from tuner.sandbox.device.profile import parse_profile  # noqa: E402
from tuner.target.connection import connect  # noqa: E402

SEED_S = {0: 40.26, 1: 98.13, 2: 55.34, 4: 52.51, 8: 54.95, 16: 54.35, 32: 55.20, 64: None, 128: 54.96, 256: 54.34}
EIC = (0, 1, 2, 4, 8, 16, 32, 64, 128, 256)
OUT = Path(__file__).parent / "measured" / "devices" / "gp2-seed"


def seed_query(scale: int) -> str:
    """The seed's query with its range at the same share of the table: aid 1000..10,000,000 of 100,000,000 rows."""
    return (f"SELECT * FROM pgbench_accounts WHERE aid BETWEEN 1000 AND {scale * 10_000} AND abalance != 0")


def load() -> float:
    return round(os.getloadavg()[0], 2)


def interval(values: list[float]) -> tuple[float, float]:
    """95 % interval of the mean (t quantile for small n)."""
    n = len(values)
    if n < 2:
        return (values[0], values[0])
    t = {2: 12.71, 3: 4.30, 4: 3.18, 5: 2.78, 6: 2.57, 7: 2.45, 8: 2.36}.get(n, 2.26 if n < 12 else 2.0)
    half = t * statistics.stdev(values) / n ** 0.5
    mean = statistics.fmean(values)
    return (mean - half, mean + half)


async def probe(sb: Sandbox, sql: str, ra: int, eic: int) -> dict[str, Any]:
    assert sb.device is not None
    Path(f"/sys/block/{Path(sb.device).name}/queue/read_ahead_kb").write_text(f"{ra}\n")
    await sb.restart_standby()  # a file's readahead is copied when it is opened; shared buffers emptied
    await asyncio.to_thread(drop_caches)
    stat = Path(f"/sys/block/{Path(sb.device).name}/stat")
    conn = await connect(sb.dsn())
    try:
        before = [int(x) for x in stat.read_text().split()]
        await conn.execute("SET max_parallel_workers_per_gather = 0; SET jit = off; SET track_io_timing = on; "
                           f"SET enable_indexscan = off; SET effective_io_concurrency = {eic}")
        res = parse(json.loads(await conn.fetchval(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}")))
        after = [int(x) for x in stat.read_text().split()]
    finally:
        await conn.close()
    return {"ms": round(res.execution_time_ms, 1), "heap_read": res.heap_read, "read": res.shared_read,
            "io_ms": None if res.io_read_time_ms is None else round(res.io_read_time_ms, 1),
            "bitmap": "Bitmap Heap Scan" in res.node_types,
            # the device's own view (/sys/block/*/stat): requests completed, merged, KiB read
            "dev_reads": after[0] - before[0], "dev_merged": after[1] - before[1], "dev_kib": (after[2] - before[2]) // 2}


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    device = parse_profile(args.device)
    sql = seed_query(args.scale)
    cells = [(ra, eic) for ra in args.ra for eic in args.eic]
    raw: dict[str, list[dict[str, Any]]] = {f"{ra}/{eic}": [] for ra, eic in cells}
    rng = random.Random(args.seed)
    t0, load0 = time.monotonic(), load()
    async with Sandbox(base_dir=Path("/var/tmp"), scale=args.scale, device=device) as sb:
        conn = await connect(sb.dsn())
        try:
            version = await conn.fetchval("SHOW server_version")
            pages = await conn.fetchval("SELECT relpages FROM pg_class WHERE relname = 'pgbench_accounts'")
        finally:
            await conn.close()
        warm = await probe(sb, sql, args.ra[0], args.eic[0])  # not scored: the first read after loading
        print(f"  warm-up {warm['ms'] / 1000:.1f} s (not scored)", file=sys.stderr, flush=True)
        for block in range(args.repeats):
            order = cells[:]
            rng.shuffle(order)  # a fresh order per block
            for ra, eic in order:
                raw[f"{ra}/{eic}"].append(await probe(sb, sql, ra, eic))
            print(f"  block {block + 1}/{args.repeats} done, {time.monotonic() - t0:.0f} s, load {load()}",
                  file=sys.stderr, flush=True)
    out: dict[str, Any] = {
        "device": str(device), "device_arg": args.device, "scale": args.scale, "postgres": version,
        "relpages": pages, "query": sql, "repeats": args.repeats, "seed": args.seed, "kernel": os.uname().release,
        "wall_s": round(time.monotonic() - t0), "load": [load0, load()], "cells": {},
    }
    for key, rows in raw.items():
        ms = [r["ms"] for r in rows]
        lo, hi = interval(ms)
        out["cells"][key] = {"median_ms": round(statistics.median(ms), 1), "mean_ms": round(statistics.fmean(ms), 1),
                             "ci95_ms": [round(lo, 1), round(hi, 1)], "ms": ms,
                             "heap_read": rows[0]["heap_read"], "bitmap": all(r["bitmap"] for r in rows),
                             "io_ms": [r["io_ms"] for r in rows],
                             "dev_reads": [r["dev_reads"] for r in rows], "dev_merged": [r["dev_merged"] for r in rows],
                             "dev_kib": [r["dev_kib"] for r in rows]}
    return out


def table(result: dict[str, Any]) -> str:
    ras = sorted({int(k.split("/")[0]) for k in result["cells"]})
    lines = ["| eic | seed (s) | seed ÷ eic 0 | " + " | ".join(f"RA {ra} KiB: median s (÷ eic 0)" for ra in ras) + " |",
             "|---|---|---|" + "---|" * len(ras)]
    eics = sorted({int(k.split("/")[1]) for k in result["cells"]})
    for eic in eics:
        seed = SEED_S.get(eic)
        row = [str(eic), "-" if seed is None else f"{seed:.1f}", "-" if seed is None else f"{seed / SEED_S[0]:.2f}"]
        for ra in ras:
            c, base = result["cells"].get(f"{ra}/{eic}"), result["cells"].get(f"{ra}/0")
            row.append("-" if c is None else f"{c['median_ms'] / 1000:.2f}" +
                       ("" if base is None else f" ({c['median_ms'] / base['median_ms']:.2f})"))
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="gp2-100g", help="the emulated volume (a tuner device profile)")
    ap.add_argument("--scale", type=int, default=20, help="pgbench scale of the sandbox (the seed's was 1000)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--ra", type=lambda s: [int(x) for x in s.split(",")], default=[128],
                    help="read_ahead_kb values, comma-separated (128: what a new EBS volume gets)")
    ap.add_argument("--eic", type=lambda s: [int(x) for x in s.split(",")], default=list(EIC))
    ap.add_argument("--seed", type=int, default=54)
    ap.add_argument("--quick", action="store_true", help="smoke run: scale 2, eic 0,1,8, one block")
    ap.add_argument("--out", type=Path, default=None, help=f"result file (default {OUT}/<device>.json)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("gp2_seed.py needs root (a loop device, drop_caches, read_ahead_kb)")
    if args.quick:
        args.scale, args.eic, args.repeats = 2, [0, 1, 8], 1
    log.configure("warning")
    result = asyncio.run(measure(args))
    path = args.out or OUT / f"{args.device.replace('=', '').replace(',', '_')}{'-quick' if args.quick else ''}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, separators=(",", ":")) + "\n")
    print(table(result))
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
