"""The search space: knobs and their scales, a configuration, the answer, and the probes' history."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

Point = dict[str, int]


@dataclass(frozen=True)
class Dimension:
    """One integer knob and the scale it is searched on."""

    name: str
    low: int
    high: int
    scale: Literal["log2p1", "linear"] = "log2p1"
    # Values the knob can hold are multiples of this (read_ahead_kb: the page size in KiB; the kernel keeps
    # whole pages, so 931 would read back as 928). 0 stays reachable.
    quantum: int = 1
    # Whether ``low`` / ``high`` is the knob's own limit on this server (the catalogue's or the server's), not
    # only the policy's: an answer at such an edge cannot be helped by widening the policy's range.
    limits: tuple[bool, bool] = (False, False)

    # On the log2p1 scale, 0 ("off": no prefetching, no readahead) is a different mechanism, not a small
    # value: it sits at z = -1, two units from 1, so the model has room for the cliff between them.
    ZERO_Z = -1.0

    @property
    def _zero_apart(self) -> bool:
        return self.scale == "log2p1" and self.low == 0

    def to_z(self, value: float) -> float:
        if self.scale != "log2p1":
            return float(value)
        if value == 0 and self._zero_apart:
            return self.ZERO_Z
        return math.log2(1 + value)

    def from_z(self, z: float) -> int:
        if self.scale != "log2p1":
            raw = z
        elif self._zero_apart:
            raw = 0 if z < 0 else max(1, 2**z - 1)
        else:
            raw = 2**z - 1
        return self.snap(raw)

    def snap(self, raw: float) -> int:
        """The nearest value the knob can hold, inside the bounds (a non-zero value never snaps to 0)."""
        q = self.quantum
        v = round(raw) if q == 1 else (0 if raw <= 0 else max(q, q * round(raw / q)))
        lo = self.low if q == 1 or self.low % q == 0 else q * -(-self.low // q)
        hi = self.high if q == 1 else q * (self.high // q)
        return int(min(hi, max(lo, v)))

    @property
    def z_low(self) -> float:
        return self.to_z(self.low)

    @property
    def z_high(self) -> float:
        return self.to_z(self.high)

    def candidates(self, limit: int = 2048) -> list[int]:
        """Values the recommendation may take: every holdable value, or a dense log grid for wide ranges."""
        if (self.high - self.low) // self.quantum + 1 <= limit:
            return sorted({self.snap(v) for v in range(self.low, self.high + 1, self.quantum)})
        zs = np.linspace(self.z_low, self.z_high, limit)
        return sorted({self.from_z(float(z)) for z in zs} | set(self.round_values()))

    def ladder(self) -> list[int]:
        """The values a 1-D search may probe: the round values (0, 1, powers of two, the bounds) and the half
        steps between them (3, 6, 12, 24, 48 … — 1.5 times a power of two), so that neighbours are at most a
        factor 1.5 apart; multiples of the quantum only. Half steps are probed only where a V through the best
        value and its round neighbours puts one below the best (``rules.HalfStep``)."""
        if self.scale != "log2p1":
            span = self.high - self.low
            steps = {self.low + round(span * i / 16) for i in range(17)}
        else:
            steps = {self.low, self.high, 0, 1} | {m * 2**k for k in range(40) for m in (2, 3)}
        return sorted({self.snap(v) for v in steps if self.low <= v <= self.high and v % self.quantum == 0})

    def round_values(self) -> list[int]:
        """Values an operator would write in a config file: 0, 1 and powers of two, plus the bounds."""
        ladder = {self.low, self.high, 0, 1} | {2**k for k in range(0, 31)}
        return sorted(v for v in ladder if self.low <= v <= self.high and v % self.quantum == 0)


@dataclass(frozen=True)
class Suggestion:
    config: Point
    predicted_ms: float | None  # the model's prediction at config (None without a model)
    # Per knob: the smallest and largest value the measurements cannot tell apart from the best: plain pairs in
    # the search's own answer (``_answer``), a ``tuner.report.near.NearOptimal`` in what it reports (``recommendation``;
    # ``tuner.optimiser`` says how it is computed).
    near_optimal: Any
    source: Literal["model", "observations"]


@dataclass
class History:
    """Every probe in order: its configuration and its time in ms (None for a failed probe)."""

    configs: list[Point] = field(default_factory=list)
    values_ms: list[float | None] = field(default_factory=list)

    @property
    def ok(self) -> list[tuple[Point, float]]:
        return [(c, v) for c, v in zip(self.configs, self.values_ms, strict=True) if v is not None]

    def consecutive_failures(self) -> int:
        n = 0
        for v in reversed(self.values_ms):
            if v is not None:
                break
            n += 1
        return n


def pooled_sd(groups: Sequence[Sequence[float]]) -> float:
    """Pooled within-group standard deviation (the noise of one probe, from repeated probes)."""
    df = sum(len(g) - 1 for g in groups)
    if df <= 0:
        return 0.0
    ss = sum(sum((x - sum(g) / len(g)) ** 2 for x in g) for g in groups)
    return math.sqrt(ss / df)


def key_of(config: Mapping[str, int], dims: Sequence[Dimension]) -> tuple[int, ...]:
    """A configuration as a hashable tuple, in the dimensions' order."""
    return tuple(int(config[d.name]) for d in dims)
