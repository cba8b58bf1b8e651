"""Measure the 2-D surface effective_io_concurrency × read_ahead_kb on a sandbox, on this machine.

Run as root. It creates a loop device (image file, ``losetup --direct-io=on`` so the backing file is not
cached twice, ext4), puts a tuner sandbox (primary + hot standby) on it, and for every grid cell in a
random order, twice: sets the loop device's read_ahead_kb, restarts the standby (empties shared buffers
and makes every file be opened again, since the kernel copies readahead into a file when it is opened),
drops the OS page cache, opens a fresh connection, SETs effective_io_concurrency and runs a mixed
workload under EXPLAIN ANALYZE: one sparse bitmap heap scan (25 % of the pages) and one sequential scan of
pgbench_accounts. The cell's value is the sum of both execution times (ms, minimize).

Everything is undone on exit, also on errors and Ctrl-C: readahead restored, sandbox removed, file system
unmounted, loop device detached, image deleted.

    python benchmarks/measure_grid.py [--scale 15] [--reps 2] [--out benchmarks/surfaces]
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import itertools
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tuner import log  # noqa: E402
from tuner.probes import workload  # noqa: E402
from tuner.probes.cache import drop_caches  # noqa: E402
from tuner.probes.explain import parse  # noqa: E402
from tuner.target.connection import connect  # noqa: E402
from tuner.sandbox import Sandbox  # noqa: E402
from tuner.sandbox.loopdisk import LoopDisk  # noqa: E402

EIC = (0, 1, 2, 4, 8, 16, 32, 64, 128, 256)
READ_AHEAD_KB = (0, 16, 128, 512, 2048, 8192)


async def measure(scale: int, reps: int, seed: int) -> tuple[list[dict], dict]:
    rows: list[dict] = []
    with LoopDisk(size_mb=max(1024, scale * 60)) as disk:
        async with Sandbox(base_dir=disk.mnt, scale=scale) as sb:
            conn = await connect(sb.dsn())
            try:
                bitmap = (await workload.plan(conn, custom=(), relations=1, pages_fraction=0.25))[0]
                version = await conn.fetchval("SHOW server_version")
            finally:
                await conn.close()
            seq_sql = "SELECT count(*) FROM pgbench_accounts"
            cells = list(itertools.product(EIC, READ_AHEAD_KB)) * reps
            random.Random(seed).shuffle(cells)
            t0 = time.monotonic()
            for i, (eic, ra) in enumerate(cells):
                disk.set_read_ahead_kb(ra)
                await sb.restart_standby()
                await asyncio.to_thread(drop_caches)
                c = await connect(sb.dsn())
                try:
                    await c.execute("SET max_parallel_workers_per_gather = 0; SET jit = off; SET track_io_timing = on")
                    await c.execute(f"SET effective_io_concurrency = {eic}")
                    await c.execute("SET enable_seqscan = off; SET enable_indexscan = off; SET enable_indexonlyscan = off")
                    b = parse(json.loads(await c.fetchval(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {bitmap.sql}")))
                    await c.execute("RESET enable_seqscan; SET enable_bitmapscan = off; SET enable_indexscan = off")
                    s = parse(json.loads(await c.fetchval(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {seq_sql}")))
                finally:
                    await c.close()
                rows.append({
                    "effective_io_concurrency": eic, "read_ahead_kb": ra, "order": i,
                    "bitmap_ms": round(b.execution_time_ms, 2), "seq_ms": round(s.execution_time_ms, 2),
                    "value": round(b.execution_time_ms + s.execution_time_ms, 2),
                    "bitmap_heap_read": b.heap_read, "seq_read": s.shared_read,
                })
                if (i + 1) % 10 == 0:
                    print(f"  {i + 1}/{len(cells)} probes, {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)
    meta = {"postgres": version, "scale": scale, "reps": reps, "seed": seed, "bitmap_sql": bitmap.sql,
            "seq_sql": seq_sql, "kernel": os.uname().release, "device": "loop (direct-io) on the host's virtio disk"}
    return rows, meta


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=int, default=15)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "surfaces")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("measure_grid.py needs root (loop devices, mount, drop_caches, read_ahead_kb)")
    log.configure("warning")
    rows, meta = asyncio.run(measure(args.scale, args.reps, args.seed))
    name = "sandbox-pg15-eic-readahead"
    (args.out / "raw").mkdir(parents=True, exist_ok=True)
    with (args.out / "raw" / f"{name}.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    (args.out / "raw" / f"{name}.json").write_text(json.dumps(meta, indent=2) + "\n")
    with (args.out / f"{name}.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["effective_io_concurrency", "read_ahead_kb", "value", "direction"])
        for eic, ra in itertools.product(EIC, READ_AHEAD_KB):
            vals = [r["value"] for r in rows if r["effective_io_concurrency"] == eic and r["read_ahead_kb"] == ra]
            w.writerow([eic, ra, round(statistics.median(vals), 2), "minimize"])
    print(f"wrote {args.out / name}.csv and raw data", file=sys.stderr)


if __name__ == "__main__":
    main()
