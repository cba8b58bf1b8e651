"""A block device of tuner's own: an image file attached as a loop device, formatted ext4 and mounted.

The sandbox lives on one when tuner runs as root, so the readahead family has a real device to tune that is
nobody else's; the readahead tests and ``benchmarks/measure_grid.py`` use it too. ``losetup --direct-io=on`` keeps
the backing file out of the page cache (else data is cached twice and the loop device's own ``read_ahead_kb``
would not govern). Everything is undone on exit, also after an error: readahead written back, file system
unmounted, device detached, image deleted. :func:`release` undoes what a killed process left.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

IMAGE = "disk.img"
MOUNT = "mnt"
STATE = "loop.json"  # the device and the readahead it had before it was attached, for release() after a crash


def available() -> bool:
    """Root, and the tools exist."""
    return os.geteuid() == 0 and all(shutil.which(t) for t in ("losetup", "mkfs.ext4", "mount", "umount"))


def release(directory: Path) -> None:
    """Unmount ``directory/mnt``, detach every loop device backed by a file under ``directory`` (its own image, or
    a device profile's file on a tmpfs or the latency layer in it) and give it back the readahead it had before it
    was attached (after a crash of the process that attached it)."""
    mnt = directory / MOUNT
    try:
        state = json.loads((directory / STATE).read_text())
    except (OSError, ValueError):
        state = {}
    if os.path.ismount(mnt):
        subprocess.run(["umount", "-l", str(mnt)], check=False, capture_output=True)
    for dev in backed_by(directory):
        detach(dev, state.get("read_ahead_kb") if state.get("dev") == dev else None)


def backed_by(directory: Path) -> list[str]:
    """Loop devices whose backing file lies under ``directory``, read from sysfs (``losetup -j`` would stat the
    file, which hangs or fails when it is on the file system of a latency-layer helper that died)."""
    prefix = str(directory.resolve()) + "/"
    found = []
    for backing in Path("/sys/block").glob("loop*/loop/backing_file"):
        try:
            path = backing.read_text().strip().removesuffix(" (deleted)")
        except OSError:
            continue
        if path.startswith(prefix):
            found.append("/dev/" + backing.parent.parent.name)
    return found


def detach(dev: str, read_ahead_kb: str | None, *, timeout_s: float = 15.0) -> None:
    """Detach ``dev`` and give it back ``read_ahead_kb``. Detaching makes the kernel recompute the device's
    readahead (to 2560 KiB here), and a device still open — a lazily unmounted file system whose last user is
    exiting — is detached only later, when it is closed: so wait until the detach has really happened
    (``/sys/block/NAME/loop`` is gone) before writing the old value, or the late detach overwrites it."""
    name = Path(dev).name
    subprocess.run(["losetup", "-d", dev], check=False, capture_output=True)
    deadline = time.monotonic() + timeout_s
    while (Path("/sys/block") / name / "loop").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    if read_ahead_kb is not None:
        with contextlib.suppress(OSError):
            (Path("/sys/block") / name / "queue" / "read_ahead_kb").write_text(f"{read_ahead_kb}\n")


class LoopDisk:
    """A real block device for readahead tests and benchmarks (root only): an image file attached with
    ``losetup --direct-io=on`` (so the backing file is not cached a second time and the loop device's own
    ``read_ahead_kb`` governs), formatted ext4 and mounted. On exit — also after an error — the readahead it had
    is written back, the file system unmounted, the device detached and the image deleted."""

    def __init__(
        self, size_mb: int, *, base_dir: Path = Path("/var/tmp"), read_ahead_kb: int | None = None,
        directory: Path | None = None, image: Path | None = None,
    ) -> None:
        self.size_mb = size_mb  # the image is sparse: only what is written takes disk space
        self.base_dir = base_dir
        self.initial_read_ahead_kb = read_ahead_kb
        self._given_dir = directory  # None: a new temporary directory under base_dir, removed on exit
        self._given_image = image  # a file someone else made and removes (a device profile's): attach it as it is
        self.dir = Path()
        self.dev: str | None = None
        self.mounted = False
        self.ra_original: str | None = None

    @property
    def name(self) -> str:
        assert self.dev
        return Path(self.dev).name

    @property
    def mnt(self) -> Path:
        return self.dir / MOUNT

    @property
    def read_ahead_path(self) -> Path:
        return Path("/sys/block") / self.name / "queue" / "read_ahead_kb"

    def _sh(self, *args: str) -> str:
        return subprocess.run(args, check=True, capture_output=True, text=True).stdout.strip()

    @property
    def node(self) -> str:
        assert self.dev
        return self.dev

    def __enter__(self) -> LoopDisk:
        self.dir = self._given_dir or Path(tempfile.mkdtemp(prefix="tuner-loop-", dir=self.base_dir))
        try:
            image = self._given_image or self.dir / IMAGE
            if self._given_image is None:
                image.touch()
                os.truncate(image, self.size_mb * 1024 * 1024)
            # Attaching makes the kernel recompute the device's readahead (here 128 -> 2560 KiB): remember what the
            # free device had before, and put that back after detaching.
            # A device another process takes meanwhile, or one whose deferred detach has not finished yet,
            # refuses the attach: ask again for a free one (a blind `--find` fallback would attach a device
            # whose pre-attach value nobody read, and leave it at the kernel's 2560 KiB afterwards).
            for attempt in range(10):
                free = self._sh("losetup", "--find")
                try:
                    self.ra_original = (Path("/sys/block") / Path(free).name / "queue" / "read_ahead_kb").read_text().strip()
                    self.dev = self._sh("losetup", "--direct-io=on", "--show", free, str(image))
                    break
                except (OSError, subprocess.CalledProcessError):
                    time.sleep(0.1 * (attempt + 1))
            else:
                self.dev = self._sh("losetup", "--direct-io=on", "--find", "--show", str(image))
                self.ra_original = None
            (self.dir / STATE).write_text(json.dumps({"dev": self.dev, "read_ahead_kb": self.ra_original}))
            self._sh("mkfs.ext4", "-q", "-E", "lazy_itable_init=0,lazy_journal_init=0", self.dev)
            self.mnt.mkdir()
            self._sh("mount", self.dev, str(self.mnt))
            self.mounted = True
            if self._given_dir is None:  # a given directory's mode is its owner's business
                os.chmod(self.dir, 0o755)
            os.chmod(self.mnt, 0o755)
            if self.initial_read_ahead_kb is not None:
                self.set_read_ahead_kb(self.initial_read_ahead_kb)
        except BaseException:
            self.__exit__()
            raise
        return self

    def read_ahead_kb(self) -> int:
        return int(self.read_ahead_path.read_text().strip())

    def set_read_ahead_kb(self, kb: int) -> None:
        self.read_ahead_path.write_text(f"{kb}\n")

    def __exit__(self, *exc: object) -> None:
        if self.mounted:
            subprocess.run(["umount", str(self.mnt)], check=False, capture_output=True)
            self.mounted = False
        if self.dev:
            dev, self.dev = self.dev, None
            detach(dev, self.ra_original)  # the value the device had before it was attached
        if self._given_dir is None:
            shutil.rmtree(self.dir, ignore_errors=True)
        elif self._given_image is None:
            (self.dir / IMAGE).unlink(missing_ok=True)
