"""Why the write caps of a device profile are latencyfs's and not a cgroup's, and what a flush costs on the loop
device (issue #55 part 1; docs/devices.md, "Who issues the writes").

    sudo .venv/bin/python benchmarks/devices_writes.py [--json benchmarks/measured/devices/writes/writes.json]

Three parts, each on a loop device built exactly as the sandbox builds it (:class:`DeviceStack` under a
:class:`LoopDisk` or a :class:`Sandbox`), with latencyfs in the stack so its counters show what reached the disk:

* **cgroup** — a cgroup v1 ``blkio.throttle.write_iops_device`` of 200 on the loop device's ``7:N``: 4 KiB
  O_DIRECT writes and buffered writes + fdatasync, inside the cgroup and outside; then the bytes the cgroup
  counted on ``7:N`` against the bytes that reached latencyfs for 16 MiB written O_DIRECT, buffered + fdatasync,
  and buffered and left to the kernel's flusher (40 s).
* **flush** — on ``flush=5ms``: pg_test_fsync's loop (8 kB rewrite + fdatasync) alone and two side by side; 4 KiB
  direct reads alone and beside a flushing loop (the loop driver serves a flush synchronously in its worker).
* **postgres** — PostgreSQL 15 sandboxes: with every server in the cgroup (no binding cap), 10 s of one-client
  commits and a CHECKPOINT, the cgroup's count against latencyfs's; on ``flush=5ms``, the commit rate with the hot
  standby running and after it is stopped, and ``pg_test_fsync -s 2``'s first lines.

cgroup v1 only (the host this was measured on); ~3 minutes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tuner.sandbox import Sandbox, find_binaries  # noqa: E402
from tuner.sandbox.device import DeviceStack, parse_profile  # noqa: E402
from tuner.sandbox.device.throttle import cgroup_root  # noqa: E402
from tuner.sandbox.loopdisk import LoopDisk  # noqa: E402
from tuner.target.connection import connect  # noqa: E402

IO = ROOT / "tests" / "integration" / "devices_io.py"  # the device tests' I/O program: run in or out of a cgroup
PG15 = Path("/usr/lib/postgresql/15/bin")
UNCAPPED = "iops=1000000,wmbps=1000000"  # a cgroup and the layer, neither binding
WRITE_IOPS_CAP = 200


def io(stack: DeviceStack, *args: object, in_cgroup: bool = True) -> dict[str, Any]:
    cmd = [sys.executable, str(IO), *map(str, args)]
    cmd = (stack.wrap(cmd, None) or cmd) if in_cgroup else cmd
    out: dict[str, Any] = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=300).stdout)
    return out


def counted(cgroup: Path, majmin: str, what: str) -> int:
    """The cgroup's write count on ``majmin``: ``io_service_bytes`` (bytes) or ``io_serviced`` (I/Os)."""
    for line in (cgroup / f"blkio.throttle.{what}").read_text().splitlines():
        if line.startswith(f"{majmin} Write "):
            return int(line.split()[2])
    return 0


def majmin_of(dev: str) -> str:
    return (Path("/sys/class/block") / Path(dev).name / "dev").read_text().strip()


@contextmanager
def loop_on(profile: str, base: Path) -> Iterator[tuple[DeviceStack, LoopDisk]]:
    root = Path(tempfile.mkdtemp(prefix="tuner-writes-", dir=base))
    stack = DeviceStack(parse_profile(profile), root, 256)
    try:
        image = stack.prepare()
        with LoopDisk(256, directory=root, image=image) as loop:
            for name in ("a", "b"):
                subprocess.run(["dd", "if=/dev/zero", f"of={loop.mnt / name}", "bs=1M", "count=32", "status=none",
                                "conv=fsync"], check=True)
            subprocess.run(["dd", "if=/dev/urandom", f"of={loop.mnt / 'data'}", "bs=1M", "count=64", "status=none",
                            "oflag=direct"], check=True)
            stack.activate(loop.node)
            yield stack, loop
    finally:
        stack.close()
        subprocess.run(["rm", "-rf", str(root)], check=False)


def delta(stack: DeviceStack, before: dict[str, int]) -> dict[str, int]:
    now = stack.layer_stats() or {}
    return {k: now[k] - before[k] for k in ("writes", "write_bytes", "flushes")}


def part_cgroup(base: Path) -> dict[str, Any]:
    out: dict[str, Any] = {"write_iops_cap": WRITE_IOPS_CAP, "streams": {}, "bytes_mib": {}}
    with loop_on(UNCAPPED, base) as (stack, loop):
        assert stack.cgroup is not None
        mm = majmin_of(loop.node)
        (stack.cgroup / "blkio.throttle.write_iops_device").write_text(f"{mm} {WRITE_IOPS_CAP}\n")
        for mode in ("direct", "fsync"):
            for inside in (True, False):
                before = stack.layer_stats() or {}
                got = io(stack, "wrate", loop.mnt / "a", 4096, 3, mode, in_cgroup=inside)
                out["streams"][f"{mode} {'inside' if inside else 'outside'}"] = {**got, "layer": delta(stack, before)}
        (stack.cgroup / "blkio.throttle.write_iops_device").write_text(f"{mm} 0\n")
        f = loop.mnt / "a"
        for label, flags, wait in (("O_DIRECT", ["oflag=direct", "conv=notrunc"], 0.0),
                                   ("buffered + fdatasync", ["conv=notrunc,fdatasync"], 0.0),
                                   ("buffered, the kernel's writeback (40 s)", ["conv=notrunc"], 40.0)):
            c0, l0 = counted(stack.cgroup, mm, "io_service_bytes"), stack.layer_stats() or {}
            subprocess.run(stack.wrap(["dd", "if=/dev/urandom", f"of={f}", "bs=1M", "count=16", "status=none", *flags],
                                      None) or [], check=True)
            time.sleep(wait)
            out["bytes_mib"][label] = {"cgroup": (counted(stack.cgroup, mm, "io_service_bytes") - c0) / 2**20,
                                       "layer": delta(stack, l0)["write_bytes"] / 2**20}
            print(label, out["bytes_mib"][label], flush=True)
    return out


def part_flush(base: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with loop_on("flush=5ms", base) as (stack, loop):
        def start(*args: object) -> subprocess.Popen[str]:
            return subprocess.Popen([sys.executable, str(IO), *map(str, args)], stdout=subprocess.PIPE, text=True)

        def result(proc: subprocess.Popen[str]) -> dict[str, Any]:
            value: dict[str, Any] = json.loads(proc.communicate(timeout=300)[0])
            return value

        before = stack.layer_stats() or {}
        out["one flusher"] = {**result(start("flush", loop.mnt / "a", 300)), "layer": delta(stack, before)}
        p1, p2 = start("flush", loop.mnt / "a", 300), start("flush", loop.mnt / "b", 300)
        out["two flushers"] = [result(p1), result(p2)]
        out["reads alone"] = result(start("single", loop.mnt / "data", 200))
        p1 = start("flush", loop.mnt / "a", 400)
        # Reads start once the flusher is flushing (a Python start-up on a loaded machine can take longer than the
        # 200 reads: a first version slept 0.3 s and sometimes read before any flush, 0.06 ms against 5.3).
        first = (stack.layer_stats() or {})["flushes"]
        while (stack.layer_stats() or {})["flushes"] < first + 5:
            time.sleep(0.005)
        out["reads beside a flusher"] = result(start("single", loop.mnt / "data", 200))
        result(p1)
    print(json.dumps(out), flush=True)
    return out


async def commits(sb: Sandbox, seconds: float) -> dict[str, Any]:
    stack = sb.device_stack
    assert stack is not None
    conn = await connect(sb.dsn("primary"))
    try:
        await conn.execute("CREATE TABLE IF NOT EXISTS commits (id int)")
        w0 = await conn.fetchrow("SELECT wal_sync FROM pg_stat_wal")
        before, t, n = stack.layer_stats() or {}, time.monotonic(), 0
        while time.monotonic() - t < seconds:
            await conn.execute("INSERT INTO commits VALUES (1)")
            n += 1
        elapsed = time.monotonic() - t
        w1 = await conn.fetchrow("SELECT wal_sync FROM pg_stat_wal")
    finally:
        await conn.close()
    return {"commits": n, "seconds": elapsed, "per_s": n / elapsed, "wal_syncs": w1[0] - w0[0],
            "layer": delta(stack, before)}


async def part_postgres(base: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    binaries = find_binaries(PG15)
    async with Sandbox(base_dir=base, scale=1, binaries=binaries, device=parse_profile(UNCAPPED)) as sb:
        stack = sb.device_stack
        assert stack is not None and stack.cgroup is not None and sb.device
        mm = majmin_of(sb.device)

        def snap() -> tuple[int, int, dict[str, int]]:
            assert stack is not None and stack.cgroup is not None
            return (counted(stack.cgroup, mm, "io_service_bytes"), counted(stack.cgroup, mm, "io_serviced"),
                    stack.layer_stats() or {})

        c0, n0, _ = snap()
        run = await commits(sb, 10)
        c1, n1, _ = snap()
        out["commits, uncapped"] = {**run, "cgroup_mib": (c1 - c0) / 2**20, "cgroup_ios": n1 - n0}
        conn = await connect(sb.dsn("primary"))
        try:
            await conn.execute("CREATE TABLE rows AS SELECT g AS id, repeat('y', 200) AS v FROM generate_series(1, 200000) g")
            c0, n0, l0 = snap()
            await conn.execute("CHECKPOINT")
            c1, n1, _ = snap()
        finally:
            await conn.close()
        out["checkpoint after 200,000 rows"] = {"cgroup_mib": (c1 - c0) / 2**20, "cgroup_ios": n1 - n0,
                                                "layer": delta(stack, l0)}
    async with Sandbox(base_dir=base, scale=1, binaries=binaries, device=parse_profile("flush=5ms")) as sb:
        out["commits, flush=5ms, with the standby"] = await commits(sb, 5)
        await sb.stop_standby()
        out["commits, flush=5ms, standby stopped"] = await commits(sb, 5)
        test_file = sb.data_root / "pg_test_fsync.tmp"
        proc = subprocess.run([str(PG15 / "pg_test_fsync"), "-s", "2", "-f", str(test_file)], capture_output=True,
                              text=True, timeout=600)
        out["pg_test_fsync, flush=5ms"] = [ln.strip() for ln in proc.stdout.splitlines() if "ops/sec" in ln][:5]
    print(json.dumps(out), flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "measured" / "devices" / "writes" / "writes.json")
    args = parser.parse_args()
    found = cgroup_root()
    if found is None or found[1] != 1:
        sys.exit("devices_writes.py measures cgroup v1's blkio throttle, and this host has no v1 blkio controller")
    base = Path(tempfile.mkdtemp(prefix="tuner-writes-", dir="/var/tmp"))
    base.chmod(0o755)
    started = time.time()
    try:
        result = {"kernel": subprocess.run(["uname", "-r"], capture_output=True, text=True).stdout.strip(),
                  "load_before": Path("/proc/loadavg").read_text().split()[:3],
                  "cgroup": part_cgroup(base), "flush": part_flush(base),
                  "postgres": asyncio.run(part_postgres(base)),
                  "load_after": Path("/proc/loadavg").read_text().split()[:3],
                  "wall_s": round(time.time() - started, 1)}
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=False)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.json} in {result['wall_s']} s")


if __name__ == "__main__":
    main()
