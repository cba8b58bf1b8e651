"""Helpers for tests and benchmarks of the pure core: a synthetic probe over a known response surface.

It is a fake for pure logic only (the search and confirmation loops); anything that talks to PostgreSQL
is tested against a real server.
"""

from __future__ import annotations

import math
import os
import random
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from datetime import UTC, datetime
from typing import Literal

from tuner.model import Trial

Surface = Callable[[dict[str, int]], float]


class SyntheticProbe:
    """``await probe(config, phase=…, arm=…)`` → a Trial whose value is ``surface(config)`` times lognormal
    noise with coefficient of variation ``noise_cv``; ``fail_when(config)`` makes a probe fail."""

    def __init__(
        self,
        surface: Surface,
        *,
        noise_cv: float = 0.0,
        seed: int = 0,
        fail_when: Callable[[dict[str, int]], bool] | None = None,
    ) -> None:
        self.surface = surface
        self.sigma = math.sqrt(math.log1p(noise_cv**2))
        self.rng = random.Random(seed)
        self.fail_when = fail_when
        self.calls: list[tuple[dict[str, int], str, str | None]] = []

    async def __call__(
        self,
        config: dict[str, int],
        *,
        phase: Literal["search", "confirm"] = "search",
        arm: Literal["baseline", "candidate"] | None = None,
    ) -> Trial:
        self.calls.append((dict(config), phase, arm))
        now = datetime.now(UTC)
        if self.fail_when is not None and self.fail_when(config):
            return Trial(config=config, value=None, status="failed", phase=phase, arm=arm, reason="synthetic failure",
                         started_at=now, duration_s=0.0)
        noise = math.exp(self.rng.gauss(-self.sigma**2 / 2, self.sigma)) if self.sigma else 1.0
        return Trial(config=config, value=self.surface(config) * noise, status="ok", phase=phase, arm=arm,
                     started_at=now, duration_s=0.0)


def seed_like_surface(config: dict[str, int]) -> float:
    """Shaped like the PG 15 cold bitmap-scan curve measured here: 1 is worst, 0 is middling, high wins."""
    e = config["effective_io_concurrency"]
    if e == 0:
        return 500.0
    if e == 1:
        return 900.0
    return 250.0 + 350.0 / (1 + math.log2(1 + e))


class LoopDisk:
    """A real block device for readahead tests and benchmarks (root only): an image file attached with
    ``losetup --direct-io=on`` (so the backing file is not cached a second time and the loop device's own
    ``read_ahead_kb`` governs), formatted ext4 and mounted. On exit — also after an error — the readahead it had
    is written back, the file system unmounted, the device detached and the image deleted."""

    def __init__(self, size_mb: int, *, base_dir: Path = Path("/var/tmp"), read_ahead_kb: int | None = None) -> None:
        self.size_mb = size_mb
        self.base_dir = base_dir
        self.initial_read_ahead_kb = read_ahead_kb
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
        return self.dir / "mnt"

    @property
    def read_ahead_path(self) -> Path:
        return Path("/sys/block") / self.name / "queue" / "read_ahead_kb"

    def _sh(self, *args: str) -> str:
        return subprocess.run(args, check=True, capture_output=True, text=True).stdout.strip()

    def __enter__(self) -> LoopDisk:
        self.dir = Path(tempfile.mkdtemp(prefix="tuner-loop-", dir=self.base_dir))
        try:
            image = self.dir / "disk.img"
            image.touch()
            os.truncate(image, self.size_mb * 1024 * 1024)
            self.dev = self._sh("losetup", "--direct-io=on", "--find", "--show", str(image))
            self.ra_original = self.read_ahead_path.read_text().strip()
            self._sh("mkfs.ext4", "-q", "-E", "lazy_itable_init=0,lazy_journal_init=0", self.dev)
            self.mnt.mkdir()
            self._sh("mount", self.dev, str(self.mnt))
            self.mounted = True
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
        if self.dev and self.ra_original is not None:
            try:
                self.read_ahead_path.write_text(self.ra_original + "\n")
            except OSError:
                pass
        if self.mounted:
            subprocess.run(["umount", str(self.mnt)], check=False, capture_output=True)
            self.mounted = False
        if self.dev:
            subprocess.run(["losetup", "-d", self.dev], check=False, capture_output=True)
            self.dev = None
        shutil.rmtree(self.dir, ignore_errors=True)
