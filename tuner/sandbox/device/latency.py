"""The read layer of a device profile: ``latencyfs`` (a small libfuse3 program, ``latencyfs.c``) serves one file,
``disk.img``, from the sandbox's image with a delay before each read; the loop device is attached to that file
with ``--direct-io=on``, so every read PostgreSQL makes from the loop device reaches the helper and waits.

``latency=Xms``: each read sleeps in its own libfuse worker thread, so reads in flight overlap (a network volume);
the kernel keeps at most ``max_background`` asynchronous direct-I/O requests in flight per FUSE connection
(12 by default, the kernel's fuse documentation, "max_background"), which the helper raises to 1024.
``hdd``: reads take a lock and wait one after another, for a seek that grows with the distance from the
previous read plus half a rotation (the model is in ``latencyfs.c``).

The write side lives here too, because it is the one place every write to the sandbox's disk passes: ``flush=``
(each FUSE_FSYNC — what the loop device makes of a flush of its file system — waits), ``wiops=`` and ``wmbps=``
(a token bucket on the helper's writes). A cgroup v1 throttle on the loop device cannot cap PostgreSQL's writes: it
writes buffered and the kernel's flusher threads write back, outside any cgroup (docs/devices.md, "Who issues the
writes"). The write side is switched on by :meth:`LatencyLayer.activate` once the sandbox is loaded.

The helper is compiled at set-up (gcc, libfuse3-dev; ``scripts/setup`` installs them) into the sandbox's own
directory, so a stale clean-up can tell it from any other process by its executable's path.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from tuner.errors import SandboxError

SOURCE = Path(__file__).with_name("latencyfs.c")
BINARY = "latencyfs"
MOUNT = "fuse"
SERVED = "disk.img"  # the one file the helper serves, under MOUNT
_SETUP_HINT = "run scripts/setup as root (it installs gcc, fuse3 and libfuse3-dev), or leave latency= and hdd out"


def missing() -> str | None:
    """What the latency layer needs and this host lacks (None: nothing)."""
    if not Path("/dev/fuse").exists():
        return "/dev/fuse"
    for tool in ("gcc", "pkg-config", "fusermount3"):
        if shutil.which(tool) is None:
            return tool
    if subprocess.run(["pkg-config", "--exists", "fuse3"], check=False).returncode != 0:
        return "libfuse3-dev"
    return None


def build(directory: Path) -> Path:
    """Compile the helper into ``directory``; its path."""
    lack = missing()
    if lack:
        raise SandboxError(f"the latency layer of a device profile needs {lack}, which this host lacks", hint=_SETUP_HINT)
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "fuse3"], check=True, capture_output=True,
                           text=True).stdout.split()
    out = directory / BINARY
    proc = subprocess.run(["gcc", "-O2", "-o", str(out), str(SOURCE), *flags, "-lm", "-lpthread"],
                          check=False, capture_output=True, text=True)
    if proc.returncode != 0:
        detail = (proc.stderr.strip().splitlines() or ["exit " + str(proc.returncode)])[-1]
        raise SandboxError(f"building the latency layer's helper failed: {detail}", hint=_SETUP_HINT)
    return out


class LatencyLayer:
    """The helper serving ``backing`` at ``mountpoint/disk.img``. :meth:`start` returns once the file is there;
    :meth:`stop` unmounts (the helper then exits) and makes sure the helper is gone."""

    def __init__(self, binary: Path, backing: Path, mountpoint: Path, *, latency_us: int, hdd: bool,
                 flush_us: int = 0, write_iops: int | None = None, write_bps: int | None = None) -> None:
        self.binary = binary
        self.backing = backing
        self.mountpoint = mountpoint
        self.latency_us = latency_us
        self.hdd = hdd
        self.flush_us = flush_us
        self.write_iops = write_iops
        self.write_bps = write_bps
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def served(self) -> Path:
        return self.mountpoint / SERVED

    def args(self) -> list[str]:
        """The helper's command line."""
        args = [str(self.binary), str(self.backing), str(self.mountpoint), str(self.latency_us)]
        if self.hdd:
            args.append("--hdd")
        if self.flush_us:
            args += ["--flush-us", str(self.flush_us)]
        if self.write_iops:
            args += ["--write-iops", str(self.write_iops)]
        if self.write_bps:
            args += ["--write-bps", str(self.write_bps)]
        return args

    def activate(self, *, timeout_s: float = 10.0) -> None:
        """Switch the write side on (flush delay, write caps): SIGUSR1, whose handler the helper installs before
        it mounts. Returns once the helper says it is on (a signal arrives asynchronously: the first probe must
        not run before it)."""
        if self.proc is None or self.proc.poll() is not None:
            raise SandboxError("the latency layer's helper is not running, so the write side cannot be switched on")
        os.kill(self.proc.pid, signal.SIGUSR1)
        deadline = time.monotonic() + timeout_s
        while self.stats().get("shaping") != 1:
            if time.monotonic() > deadline:
                raise SandboxError(
                    f"the latency layer's helper did not switch its write side on within {timeout_s:.0f} s")
            time.sleep(0.01)

    def stats(self) -> dict[str, int]:
        """The helper's counters: reads, writes, write_bytes, flushes (since it started) and shaping (1: the write
        side is on)."""
        return stats(self.mountpoint)

    def start(self, *, timeout_s: float = 30.0) -> int:
        """Start the helper; its pid."""
        self.mountpoint.mkdir(exist_ok=True)
        # Its own session: a terminal's Ctrl-C must not stop it while the loop device above it is still in use.
        self.proc = subprocess.Popen(self.args(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while not (os.path.ismount(self.mountpoint) and self.served.exists()):
            if self.proc.poll() is not None:
                err = (self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else "").strip()
                raise SandboxError(f"the latency layer's helper exited at start: {err or 'exit ' + str(self.proc.returncode)}",
                                   hint=_SETUP_HINT)
            if time.monotonic() > deadline:
                raise SandboxError(f"the latency layer's helper did not mount {self.mountpoint} within {timeout_s:.0f} s")
            time.sleep(0.02)
        return self.proc.pid

    def stop(self) -> None:
        unmount(self.mountpoint)
        if self.proc is not None:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
            if self.proc.stderr:
                self.proc.stderr.close()
            self.proc = None


def stats(mountpoint: Path) -> dict[str, int]:
    """The counters of the helper mounted at ``mountpoint`` (its ``stats`` file: one ``name value`` a line)."""
    fd = os.open(mountpoint / "stats", os.O_RDONLY)
    try:
        text = os.read(fd, 4096).decode()
    finally:
        os.close(fd)
    return {name: int(value) for name, value in (line.split() for line in text.splitlines() if line.strip())}


def unmount(mountpoint: Path) -> None:
    """Unmount the helper's file system (lazily: a dead helper's mount answers nothing, and a lazy unmount
    still takes it away)."""
    if os.path.ismount(mountpoint):
        proc = subprocess.run(["fusermount3", "-u", str(mountpoint)], check=False, capture_output=True)
        if proc.returncode != 0:
            subprocess.run(["umount", "-l", str(mountpoint)], check=False, capture_output=True)


def kill_helper(pid: int, binary: Path) -> None:
    """SIGKILL ``pid`` if it is the helper built at ``binary`` (a pid in a state file is a claim; a recycled pid
    may name anything)."""
    try:
        exe = os.readlink(f"/proc/{pid}/exe").removesuffix(" (deleted)")
    except OSError:
        return
    if exe == str(binary):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
