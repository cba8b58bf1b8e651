"""The search space: knobs and their scales, a configuration, the answer, and the probes' history."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

Config = dict[str, int]


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


class KnobRange(tuple[int, int]):
    """One knob's near-optimal range, ``(lowest, highest)``: a plain pair wherever a pair is expected (the
    store, pins, ``Decision.near_optimal``), which also carries what a report says about it — the range the
    search covered (``searched``), whether either bound is the knob's own limit (``limits``), and whether the
    measurements show a plateau across it (``plateau``: several measured values, at least a factor of
    ``Dimension``'s two octaves apart, level with the best). ``tuner.model.Recommendation`` takes those from it
    when it is given one, so every family's recommendation carries them without handling them."""

    searched: tuple[int, int] | None
    limits: tuple[bool, bool]
    plateau: bool
    step: int

    def __new__(cls, low: int, high: int, *, searched: tuple[int, int] | None = None,
                limits: tuple[bool, bool] = (False, False), plateau: bool = False, step: int = 1) -> KnobRange:
        if low > high:
            raise ValueError(f"a range runs from low to high, not {low}..{high}")
        out = super().__new__(cls, (int(low), int(high)))
        out.searched, out.limits, out.plateau, out.step = searched, limits, plateau, step
        return out

    @property
    def low(self) -> int:
        return self[0]

    @property
    def high(self) -> int:
        return self[1]

    def without(self, value: int, *, keep: int) -> KnobRange | None:
        """The range cut short of ``value`` on the side of ``keep`` (a value paired trials told apart from the
        recommendation): unchanged where ``value`` lies outside it (or is ``keep``), None where nothing is left."""
        if not self.low <= value <= self.high or value == keep:
            return self
        low, high = (value + self.step, self.high) if keep > value else (self.low, value - self.step)
        if low > high:
            return None
        return KnobRange(low, high, searched=self.searched, limits=self.limits, plateau=self.plateau, step=self.step)

    def __reduce__(self) -> Any:  # copy and pickle keep the attributes (a tuple subclass would drop them)
        return (_knob_range, (self.low, self.high, self.searched, self.limits, self.plateau, self.step))


def _knob_range(low: int, high: int, searched: tuple[int, int] | None, limits: tuple[bool, bool], plateau: bool,
                step: int) -> KnobRange:
    return KnobRange(low, high, searched=searched, limits=limits, plateau=plateau, step=step)


class NearOptimal(dict[str, tuple[int, int]]):
    """Per knob, its near-optimal ``KnobRange``: a plain mapping wherever one is expected, which can also say what
    the ranges become once more is known about the noise of one reading — ``given_noise(sd)``, with ``sd`` the
    standard deviation of log(time) that repeated readings since measured (``core.decide`` passes the
    confirmation's). Its ranges can only widen: the answer stays the one the search gave."""

    def __init__(self, ranges: Mapping[str, tuple[int, int]],
                 refine: Callable[[float], Mapping[str, tuple[int, int]]] | None = None) -> None:
        super().__init__(ranges)
        self._refine = refine

    def __reduce__(self) -> Any:  # a copy or a pickle (another process) keeps the ranges, not the optimiser
        return (NearOptimal, (dict(self),))

    def given_noise(self, noise_sd: float) -> NearOptimal:
        """The ranges for a reading noise of ``noise_sd`` (where it exceeds what the search's model assumed)."""
        if self._refine is None or not math.isfinite(noise_sd) or noise_sd <= 0:
            return self
        return NearOptimal(self._refine(noise_sd), self._refine)


@dataclass(frozen=True)
class Recommendation:
    config: Config
    predicted_ms: float | None  # the model's prediction at config (None without a model)
    # Per knob: the smallest and largest value the measurements cannot tell apart from the best (a
    # ``KnobRange``; ``tuner.optimiser`` says how it is computed).
    near_optimal: dict[str, tuple[int, int]]
    source: Literal["model", "observations"]


@dataclass
class History:
    """Every probe in order: its configuration and its time in ms (None for a failed probe)."""

    configs: list[Config] = field(default_factory=list)
    values_ms: list[float | None] = field(default_factory=list)

    @property
    def ok(self) -> list[tuple[Config, float]]:
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
