"""The loop device of tuner's own gives back the readahead it had, also when its detach is deferred."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

from tuner.sandbox.loopdisk import LoopDisk


def test_a_deferred_detach_still_ends_at_the_readahead_the_device_had(tmp_path: Path) -> None:
    # Detaching makes the kernel recompute the device's readahead; a device still open (here: a lazily
    # unmounted file system with a file open on it) detaches only when it is closed, after LoopDisk's exit.
    with LoopDisk(64, base_dir=tmp_path, read_ahead_kb=1000) as disk:
        name = disk.name
        before = disk.ra_original
        held = (disk.mnt / "held").open("w")
        subprocess.run(["umount", "-l", str(disk.mnt)], check=True)
        disk.mounted = False
        threading.Timer(1.0, held.close).start()
    assert not (Path("/sys/block") / name / "loop").exists()
    assert (Path("/sys/block") / name / "queue" / "read_ahead_kb").read_text().strip() == before
