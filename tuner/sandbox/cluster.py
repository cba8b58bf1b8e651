"""The sandbox itself: a throwaway primary plus a streaming hot standby that tuner starts itself.

The sandbox is created in tuner's own directory under ``base_dir`` (``/var/tmp`` by default — not tmpfs, so
cold-cache probes read from a real disk; :mod:`.host` says why a directory of its own), loaded with a
pgbench-shaped dataset, and removed afterwards — also on Ctrl-C, SIGTERM and errors. A sandbox left behind by
a killed tuner (SIGKILL) is removed the next time a sandbox is created (:mod:`.stale`).

As root (``disk = "auto"``), the clusters live on a loop device of the sandbox's own (an image file under
``base_dir``, ext4): a real block device whose readahead the readahead family may tune without touching the
host's disks. It is unmounted and detached with the sandbox, and after a crash by the next sandbox.

On PostgreSQL 17+ the primary gets ``pg_buffercache`` (it replicates to the standby), so probes can empty shared
buffers by eviction instead of restarting the standby (:mod:`tuner.probes.cache`).

PostgreSQL refuses to run as root, so as root the servers run as the ``postgres`` OS user (:mod:`.host`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import asyncpg

from tuner.fs import sqlfiles
from tuner.errors import ConfigError, SandboxError
from tuner.log import get_logger
from tuner.session.stop import to_the_end
from tuner.target.connection import connect
from tuner.sandbox import loopdisk
from tuner.sandbox.binaries import Binaries, find_binaries
from tuner.sandbox.device import LOCAL, DeviceProfile, DeviceStack
from tuner.sandbox.host import check_host
from tuner.sandbox.loopdisk import LoopDisk
from tuner.sandbox.stale import cleanup_stale, kill_postmaster, new_root, remove_if_empty, server_pids

log = get_logger("tuner.sandbox")
_SQL = str(Path(__file__).parent)
SANDBOX_READ_AHEAD_KB = 128


class Sandbox:
    """A primary and a hot standby in one temporary directory. Use as an async context manager."""

    def __init__(
        self,
        *,
        base_dir: Path = Path("/var/tmp"),
        scale: int = 50,
        bin_dir: Path | None = None,
        keep: bool = False,
        binaries: Binaries | None = None,
        on_step: Callable[[str], None] | None = None,
        disk: str = "auto",
        staging_primary: bool = False,
        device: DeviceProfile = LOCAL,
        settings: Mapping[str, str] | None = None,
    ) -> None:
        if disk not in ("auto", "loop", "host"):
            raise ValueError(f"disk must be auto, loop or host, not {disk!r}")
        if not device.local and (disk == "host" or not loopdisk.available()):
            why = 'with [sandbox] disk = "host"' if disk == "host" else "without root (and losetup, mkfs.ext4, mount)"
            raise ConfigError(
                f"the device profile {device} needs the sandbox's own loop disk, which there is none of {why}",
                hint='run tuner as root with [sandbox] disk = "auto" (the default), or leave --device out')
        self.device_profile = device
        self._device: DeviceStack | None = None
        self.base_dir = base_dir
        self.scale = scale
        self.keep = keep
        self.disk = disk
        # Mark the (throwaway) primary tuner.role = 'staging': the writable clone the wal family needs.
        self.staging_primary = staging_primary
        # Server settings of both servers (the standby is a copy of the primary's configuration), e.g.
        # shared_preload_libraries = 'pg_stat_statements'; quoted as postgresql.conf values.
        self.settings = dict(settings or {})
        self._loop: LoopDisk | None = None
        self.binaries = binaries or find_binaries(bin_dir)
        self._on_step = on_step or (lambda _msg: None)
        self.root: Path | None = None
        self._run_user: pwd.struct_passwd | None = None
        self._started: list[Path] = []
        self.primary_port = 0
        self.standby_port = 0
        # pg_ctl calls run in worker threads. A cancelled await does not stop its thread, so every call
        # holds this lock: close() then waits for an in-flight restart instead of racing it.
        self._ops = threading.Lock()

    # -- paths and DSNs ------------------------------------------------------------------------------
    @property
    def data_root(self) -> Path:
        """Where the clusters live: the sandbox's own loop device when it has one."""
        assert self.root
        return self._loop.mnt if self._loop is not None else self.root

    @property
    def device(self) -> str | None:
        """The sandbox's own block device (/dev/loopN), or None when it lives on the host's disk."""
        return self._loop.node if self._loop is not None else None

    @property
    def device_stack(self) -> DeviceStack | None:
        """The device profile's pieces under this sandbox (None for ``local``): its cgroup and its layer's counters."""
        return self._device

    @property
    def primary_dir(self) -> Path:
        return self.data_root / "primary"

    @property
    def standby_dir(self) -> Path:
        return self.data_root / "standby"

    @property
    def socket_dir(self) -> Path:
        assert self.root
        return self.root / "sock"

    def dsn(self, which: str = "standby") -> str:
        port = self.standby_port if which == "standby" else self.primary_port
        return f"postgresql://postgres@/postgres?host={self.socket_dir}&port={port}"

    # -- process helpers ----------------------------------------------------------------------------
    def _run(self, args: list[str], *, timeout: float = 600) -> str:
        user = self._run_user
        kwargs: dict[str, Any] = {}
        joined = self._device.wrap(args, user) if self._device is not None else None
        if joined is not None:  # joins the device profile's cgroup as root, then becomes the user itself
            args = joined
        elif user is not None:
            kwargs.update(user=user.pw_uid, group=user.pw_gid, extra_groups=[])
        env = self.binaries.env()
        if user is not None:
            env["HOME"] = user.pw_dir
        try:
            with self._ops:
                proc = subprocess.run(
                    args,
                    capture_output=True,
                    text=True,
                    timeout=timeout,
                    env=env,
                    cwd=str(self.root),
                    start_new_session=True,  # a terminal's Ctrl-C must not hit the servers before we stop them
                    **kwargs,  # type: ignore[arg-type]
                )
        except subprocess.TimeoutExpired:
            raise SandboxError(f"{Path(args[0]).name} did not finish within {timeout:.0f} s") from None
        if proc.returncode != 0:
            detail = (proc.stderr or proc.stdout).strip().splitlines()
            raise SandboxError(f"{Path(args[0]).name} failed: {detail[-1] if detail else 'exit ' + str(proc.returncode)}")
        return proc.stdout

    def _tool(self, name: str) -> str:
        return str(self.binaries.bin_dir / name)

    # -- lifecycle ----------------------------------------------------------------------------------
    async def __aenter__(self) -> Sandbox:
        try:
            await self.start()
        except BaseException:
            await to_the_end(self.close())
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await to_the_end(self.close())

    async def start(self) -> None:
        cleanup_stale(self.base_dir)
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self._run_user = check_host(self.base_dir, self.binaries.bin_dir)
        self.root = new_root(self.base_dir, self._run_user)
        self.socket_dir.mkdir(0o700)
        if self.disk == "loop" and not loopdisk.available():
            raise SandboxError("a sandbox on a loop device needs root and losetup, mkfs.ext4 and mount",
                               hint="set [sandbox] disk = \"auto\" or \"host\"")
        if self.disk == "loop" or (self.disk == "auto" and loopdisk.available()):
            self._on_step("loop device for the sandbox")
            # Sparse: only what the clusters write takes space (data twice, plus WAL up to max_wal_size).
            # Synchronous (about a second): a cancellation cannot fall between attaching and remembering it.
            size_mb = 4096 + self.scale * 80
            image = None
            if not self.device_profile.local:
                self._on_step(f"device {self.device_profile.described}")
                self._device = DeviceStack(self.device_profile, self.root, size_mb)
                image = self._device.prepare()
            # A fixed starting readahead: attaching makes the kernel recompute a loop device's read_ahead_kb from
            # its backing file's device (2560 KiB over this host's disk, 128 over a FUSE file), so "today's value"
            # differed with the loop device a sandbox happened to get. 128 KiB is what the kernel gives a new
            # block device (VM_READAHEAD_PAGES, include/linux/mm.h): the disk an operator starts from.
            loop = LoopDisk(size_mb, directory=self.root, image=image, read_ahead_kb=SANDBOX_READ_AHEAD_KB)
            loop.__enter__()
            self._loop = loop
        # The root stays this user's (stale clean-up trusts nothing else); the server's user owns what it writes.
        for d in (self.primary_dir, self.standby_dir):
            d.mkdir(0o700)
        if self._run_user is not None:
            for p in {self.socket_dir, self.data_root, self.primary_dir, self.standby_dir} - {self.root}:
                os.chown(p, self._run_user.pw_uid, self._run_user.pw_gid)
        self.primary_port, self.standby_port = _free_port(), _free_port()
        log.info("sandbox.create", dir=str(self.root), postgres=self.binaries.version, bin_dir=str(self.binaries.bin_dir),
                 device=self.device or "host disk")

        self._on_step(f"initdb (PostgreSQL {self.binaries.version})")
        await asyncio.to_thread(
            self._run, [self._tool("initdb"), "-D", str(self.primary_dir), "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8"]
        )
        with (self.primary_dir / "postgresql.conf").open("a") as fh:
            fh.write(
                "\n# tuner sandbox\n"
                "listen_addresses = ''\n"
                f"unix_socket_directories = '{self.socket_dir}'\n"
                "shared_buffers = 128MB\n"
                "max_wal_size = 2GB\n"
                "hot_standby = on\n"
                "logging_collector = off\n"
            )
            if self.staging_primary:
                fh.write("tuner.role = 'staging'   # tuner's own throwaway primary: a writable clone to probe WAL on\n")
            for name, value in self.settings.items():
                fh.write(f"{name} = '{value.replace(chr(39), chr(39) * 2)}'\n")
        await self._pg_ctl_start(self.primary_dir, self.primary_port)
        await self._load()
        self._on_step("pg_basebackup → hot standby")
        await asyncio.to_thread(
            self._run,
            [self._tool("pg_basebackup"), "-h", str(self.socket_dir), "-p", str(self.primary_port), "-U", "postgres",
             "-D", str(self.standby_dir), "-R", "-X", "stream", "-c", "fast", "--no-sync"],
        )
        await self._pg_ctl_start(self.standby_dir, self.standby_port)
        await self._wait_for_standby()
        if self._device is not None and self._loop is not None:
            self._device.activate(self._loop.node)  # loaded at full speed; probes run on the emulated disk

    async def _pg_ctl_start(self, data_dir: Path, port: int) -> None:
        await asyncio.to_thread(
            self._run,
            [self._tool("pg_ctl"), "-D", str(data_dir), "-l", str(data_dir / "server.log"), "-w", "-t", "120",
             "-o", f"-p {port}", "start"],
        )
        self._started.append(data_dir)

    async def _load(self) -> None:
        conn = await connect(self.dsn("primary"))
        try:
            await conn.execute(sqlfiles.load(_SQL, "sandbox_schema"))
            total = self.scale * 100_000
            chunk = 500_000
            for lo in range(1, total + 1, chunk):
                hi = min(total, lo + chunk - 1)
                self._on_step(f"loading accounts {hi:,}/{total:,}")
                await conn.execute(sqlfiles.load(_SQL, "sandbox_accounts_chunk"), lo, hi)
            await conn.execute(sqlfiles.load(_SQL, "sandbox_finish"), self.scale)
            await conn.execute(
                "INSERT INTO pgbench_tellers SELECT g, (g - 1) / 10 + 1, 0, '' FROM generate_series(1, $1::int) g",
                self.scale * 10,
            )
            self._on_step("building indexes")
            for stmt in (
                "ALTER TABLE pgbench_branches ADD PRIMARY KEY (bid)",
                "ALTER TABLE pgbench_tellers ADD PRIMARY KEY (tid)",
                "ALTER TABLE pgbench_accounts ADD PRIMARY KEY (aid)",
                "CREATE INDEX pgbench_accounts_abalance_idx ON pgbench_accounts (abalance)",
            ):
                await conn.execute(stmt)
            await self._buffercache(conn)
            self._on_step("vacuum (freeze, analyze)")
            # Freezing sets hint bits now, so probes on the standby never dirty pages.
            await conn.execute("VACUUM (FREEZE, ANALYZE)")
            await conn.execute("CHECKPOINT")
        finally:
            await conn.close()

    async def _buffercache(self, conn: asyncpg.Connection) -> None:
        """pg_buffercache on the primary (it replicates to the standby), where it can evict (17+): probes then
        empty shared buffers without restarting the standby. A build without the module just restarts."""
        if self.binaries.major < 17:
            return
        available = "SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_buffercache')"
        if not await conn.fetchval(available):
            log.info("sandbox.no_buffercache", bin_dir=str(self.binaries.bin_dir),
                     detail="pg_buffercache is not installed with these binaries: probes restart the standby")
            return
        await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_buffercache")

    async def _wait_for_standby(self, timeout_s: float = 120) -> None:
        self._on_step("waiting for the standby to catch up")
        primary = await connect(self.dsn("primary"))
        try:
            target_lsn = await primary.fetchval("SELECT pg_current_wal_lsn()")
        finally:
            await primary.close()
        deadline = time.monotonic() + timeout_s
        while True:
            standby = await connect(self.dsn("standby"))
            try:
                ok = await standby.fetchval(
                    "SELECT pg_is_in_recovery() AND pg_last_wal_replay_lsn() >= $1::pg_lsn", target_lsn
                )
            finally:
                await standby.close()
            if ok:
                return
            if time.monotonic() > deadline:
                raise SandboxError("the sandbox standby did not catch up with the primary within 2 minutes")
            await asyncio.sleep(0.2)

    async def restart_primary(self) -> None:
        """Restart the primary (fast shutdown): for restart-level settings such as wal_buffers."""
        await self._restart(self.primary_dir, self.primary_port)

    async def restart_standby(self) -> None:
        """Restart the standby (fast shutdown): empties shared buffers."""
        await self._restart(self.standby_dir, self.standby_port)

    async def _restart(self, data_dir: Path, port: int) -> None:
        await asyncio.to_thread(
            self._run,
            [self._tool("pg_ctl"), "-D", str(data_dir), "-l", str(data_dir / "server.log"), "-w",
             "-t", "120", "-m", "fast", "-o", f"-p {port}", "restart"],
        )

    async def stop_standby(self) -> None:
        """Stop the standby for good (the primary keeps running). Needed before ``CREATE TABLESPACE`` on the
        primary: the standby shares this host, replays the tablespace to the same directory, and its recovery
        would then write into the primary's files (zero pages in a freshly built index, seen in the tests)."""
        if self.standby_dir not in self._started:
            return
        await asyncio.to_thread(
            self._run, [self._tool("pg_ctl"), "-D", str(self.standby_dir), "-m", "fast", "-w", "stop"], timeout=120
        )
        self._started.remove(self.standby_dir)

    async def close(self) -> None:
        """Stop every server this sandbox started and delete its directory (unless ``keep``)."""
        if self.root is None:
            return
        for data_dir in reversed(self._started):
            try:
                await asyncio.to_thread(
                    self._run, [self._tool("pg_ctl"), "-D", str(data_dir), "-m", "immediate", "-w", "stop"], timeout=60
                )
            except SandboxError as exc:
                log.warning("sandbox.stop_failed", dir=str(data_dir), error=str(exc))
                kill_postmaster(data_dir)
        self._started.clear()
        for pid in server_pids(self.root):  # anything of ours that survived (e.g. a racing restart)
            log.warning("sandbox.kill_leftover", pid=pid)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if self._loop is not None and not self.keep:
            self._loop.__exit__()
            self._loop = None
        if self._device is not None and not self.keep:
            self._device.close()
            self._device = None
        if self.keep:
            log.info("sandbox.kept", dir=str(self.root))
        else:
            shutil.rmtree(self.root, ignore_errors=True)
            remove_if_empty(self.root.parent)  # tuner's own directory, when no other sandbox uses it
            log.info("sandbox.removed", dir=str(self.root))
        self.root = None


def _free_port() -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
