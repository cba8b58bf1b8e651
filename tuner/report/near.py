"""A knob's near-optimal range (:class:`NearRange`) and a session's ranges per knob (:class:`NearOptimal`): the
values the measurements cannot tell apart from the best, what the search covered, and how the ranges widen once
the noise of one reading is known better. The optimiser makes them; the decision and the report read them."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class NearRange:
    """One knob's near-optimal range, ``low..high``, with what a report says about it: the range the search
    covered (``searched``), whether either bound is the knob's own limit on this server (``limits``), whether the
    measurements show a plateau across it (``plateau``: measured values at least a factor of four apart, level
    with the best), and the knob's step (``step``: read_ahead_kb moves in whole pages).
    :class:`Recommendation` takes those facts from it, so every family's recommendation carries them."""

    low: int
    high: int
    searched: tuple[int, int] | None = None
    limits: tuple[bool, bool] = (False, False)
    plateau: bool = False
    step: int = 1

    def __post_init__(self) -> None:
        if self.low > self.high:
            raise ValueError(f"a range runs from low to high, not {self.low}..{self.high}")
        object.__setattr__(self, "low", int(self.low))
        object.__setattr__(self, "high", int(self.high))

    def as_pair(self) -> tuple[int, int]:
        return self.low, self.high

    def __iter__(self) -> Iterator[int]:  # ``low, high = near``
        return iter(self.as_pair())

    def holds(self, value: int) -> bool:
        return self.low <= value <= self.high

    def without(self, value: int, *, keep: int) -> NearRange | None:
        """The range cut short of ``value`` on the side of ``keep`` (a value paired trials told apart from the
        recommendation): unchanged where ``value`` lies outside it (or is ``keep``), None where nothing is left."""
        if not self.holds(value) or value == keep:
            return self
        low, high = (value + self.step, self.high) if keep > value else (self.low, value - self.step)
        return replace(self, low=low, high=high) if low <= high else None


@dataclass(frozen=True)
class NearOptimal:
    """Per knob, its :class:`NearRange`, and how the ranges widen once the noise of one reading is known better
    than the search's model knew it (``widen``: the search's refit, given the standard deviation of log(time)
    that repeated readings since measured; None where nothing can widen them — a pin's stored ranges). The ranges
    only widen: the answer stays the one the search gave."""

    ranges: Mapping[str, NearRange]
    widen: Callable[[float], Mapping[str, NearRange]] | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of_pairs(cls, pairs: Mapping[str, tuple[int, int]]) -> NearOptimal:
        """Stored ranges (a pin's), as plain pairs: nothing to widen them with."""
        return cls({k: NearRange(lo, hi) for k, (lo, hi) in pairs.items()})

    def __getitem__(self, knob: str) -> NearRange:
        return self.ranges[knob]

    def get(self, knob: str) -> NearRange | None:
        return self.ranges.get(knob)

    def pairs(self) -> dict[str, tuple[int, int]]:
        return {k: r.as_pair() for k, r in self.ranges.items()}

    def given_noise(self, noise_sd: float) -> NearOptimal:
        """The ranges for a reading noise of ``noise_sd`` (where it exceeds what the search's model assumed)."""
        if self.widen is None or not math.isfinite(noise_sd) or noise_sd <= 0:
            return self
        return NearOptimal(self.widen(noise_sd), self.widen)

    def __reduce__(self) -> Any:  # a copy or a pickle (another process) keeps the ranges, not the optimiser
        return (NearOptimal, (dict(self.ranges),))
