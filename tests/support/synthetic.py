"""Helpers for tests and benchmarks of the pure core: a synthetic probe over a known response surface.

It is a fake for pure logic only (the search and confirmation loops); anything that talks to PostgreSQL
is tested against a real server.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Literal

from tuner.report.model import Trial

__all__ = ["SyntheticProbe", "seed_like_surface"]

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

    async def __call__(self, config: dict[str, int], *, phase: Literal["search", "confirm"] = "search",
                       arm: Literal["baseline", "candidate"] | None = None) -> Trial:
        self.calls.append((dict(config), phase, arm))
        recorded: dict[str, int | str] = dict(config)
        now = datetime.now(UTC)
        if self.fail_when is not None and self.fail_when(config):
            return Trial(config=recorded, value=None, status="failed", phase=phase, arm=arm, reason="synthetic failure",
                         started_at=now, duration_s=0.0)
        noise = math.exp(self.rng.gauss(-self.sigma**2 / 2, self.sigma)) if self.sigma else 1.0
        return Trial(config=recorded, value=self.surface(config) * noise, status="ok", phase=phase, arm=arm,
                     started_at=now, duration_s=0.0)


def seed_like_surface(config: dict[str, int]) -> float:
    """Shaped like the PG 15 cold bitmap-scan curve measured here: 1 is worst, 0 is middling, high wins."""
    e = config["effective_io_concurrency"]
    if e == 0:
        return 500.0
    if e == 1:
        return 900.0
    return 250.0 + 350.0 / (1 + math.log2(1 + e))

