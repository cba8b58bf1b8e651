"""What every rule of the optimiser is and reads (``tuner.optimiser.rules`` holds the rules themselves): the
optimiser as a rule sees it, a rule, a gap rule, and the neighbourhood helpers several rules share."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar, Protocol

import numpy as np

from tuner.optimiser.space import Point, Dimension, History


class Searcher(Protocol):
    """What the rules read of the optimiser they serve (``BayesianOptimiser``)."""

    dimensions: tuple[Dimension, ...]
    tolerance: float
    budget: int
    remeasure: int
    _end: int
    _previous: Point | None
    history: History
    _start_keys: set[tuple[int, ...]]

    @property
    def probes(self) -> int: ...
    def predict(self, configs: Sequence[Mapping[str, int]]) -> list[float] | None: ...
    def _incumbent(self) -> Point: ...
    def _observed_means(self) -> dict[tuple[int, ...], float]: ...
    def _prior_configs(self) -> list[Point]: ...
    def _seen(self) -> set[tuple[int, ...]]: ...
    def _seen_values(self) -> set[int]: ...
    def _difference_sd(self, a: Mapping[str, int], b: Mapping[str, int]) -> float: ...


class Rule:
    """A rule: its constants are class attributes, set per instance to tune it."""


class GapRule(Rule):
    """A rule that names a configuration to measure before the answer can be trusted."""

    joint: ClassVar[bool] = False  # asked in joint searches
    one_knob: ClassVar[bool] = True  # asked in one-knob searches
    at_stop: ClassVar[bool] = False  # one-knob: asked only where the search would otherwise stop

    def gap(self, opt: Searcher) -> Point | None:
        """The configuration to measure next, or None."""
        raise NotImplementedError  # abstract: every gap rule in rules.GAP_RULES overrides it

    def registered(self, opt: Searcher, config: Mapping[str, int]) -> None:
        """A probe of ``config`` was made (before the optimiser records it)."""


def round_neighbours(opt: Searcher, x: int) -> list[int]:
    """1-D: the round values on either side of ``x`` (0 is not the neighbour of 1 where it is kept apart)."""
    d = opt.dimensions[0]
    coarse = d.round_values()
    below = [v for v in coarse if v < x and not (d._zero_apart and v == 0 and x > 0)]
    above = [v for v in coarse if v > x]
    return [v for v in (below[-1] if below else None, above[0] if above else None) if v is not None]


def around_incumbent(opt: Searcher) -> tuple[int, list[int], dict[int, float]]:
    """1-D: the incumbent, its round neighbours, and the model's prediction at each of them."""
    d = opt.dimensions[0]
    inc = opt._incumbent()[d.name]
    near = round_neighbours(opt, inc)
    mu = dict(zip(near + [inc], opt.predict([{d.name: v} for v in near + [inc]]) or [], strict=True))
    return inc, near, mu


def lowest_predicted(opt: Searcher, values: list[int]) -> Point:
    """1-D: the one of ``values`` the model predicts lowest (the first of equals)."""
    d = opt.dimensions[0]
    mu = opt.predict([{d.name: v} for v in values])
    assert mu is not None
    return {d.name: values[int(np.argmin(mu))]}
