"""Observations of earlier sessions on the same target (the *prior*): kept where this search can hold them,
compressed to one point per configuration, and calibrated onto this session's times before the model uses them.
"""

from __future__ import annotations

import math
import numbers
from collections import defaultdict
from collections.abc import Mapping, Sequence

from tuner.optimiser.space import Dimension, key_of


class Prior:
    """Observations of earlier sessions, compressed to one point per configuration, and their calibration.

    Absolute times drift between sessions (another data size, another cache, another day), so the prior is used
    only on this session's scale: ``calibrate`` (once the initial design has been measured) finds one offset in
    log(time) — the geometric-mean ratio of this session's times to the prior's at the configurations measured
    in both — or gives the prior up where there is none; ``recalibrate`` (after each later probe) takes every
    configuration measured in both since.
    """

    def __init__(self, points: dict[tuple[int, ...], float], observations: int, dropped: int) -> None:
        self.points = points  # configuration -> mean log(time) of its latest readings, on the prior's scale
        self.observations = observations  # prior observations kept (before compression)
        self.dropped = dropped
        self.offset: float | None = None  # log(today / prior), once calibrated and in use
        self.overlap = 0  # configurations the offset rests on
        self.pending = bool(points)  # calibration still to come (at the end of the initial design)
        if not points and not dropped:
            self.status = "not used: no prior observations"
        elif not points:
            self.status = f"not used: none of the {dropped} prior observations fits this search's knobs and ranges"
        else:
            self.status = (f"pending: {observations} prior observations of {len(points)} configurations, to be "
                           "calibrated once the initial design has been measured")

    @classmethod
    def compress(
        cls, dims: Sequence[Dimension], prior: Sequence[tuple[Mapping[str, int], float]], per_config: int
    ) -> Prior:
        """Keep the observations these dimensions can hold — the same knobs, inside their bounds, on their
        quantum, a positive time — and drop the rest (counted); per configuration, the mean log(time) of its
        latest ``per_config`` readings (the prior is oldest first). The model's fitted set is then bounded by
        the number of distinct configurations, however many sessions the store holds."""
        names = {d.name for d in dims}
        per_key: dict[tuple[int, ...], list[float]] = defaultdict(list)
        kept = dropped = 0
        for item in prior:
            try:
                config, ms = item
                ok = isinstance(config, Mapping) and set(config) == names
                ok = ok and all(_holds(d, config[d.name]) for d in dims)
                ok = ok and not isinstance(ms, bool) and isinstance(ms, numbers.Real) and math.isfinite(ms) and ms > 0
            except (TypeError, ValueError, OverflowError):
                ok = False
            if not ok:
                dropped += 1
                continue
            kept += 1
            per_key[key_of(config, dims)].append(math.log(ms))
        points = {k: sum(v[-per_config:]) / len(v[-per_config:]) for k, v in per_key.items()}
        return cls(points, kept, dropped)

    def calibrate(self, means: Mapping[tuple[int, ...], float]) -> None:
        """The initial design has been measured (``means``: this session's mean log(time) per configuration):
        use the prior, rescaled, or give it up where no configuration was measured in both."""
        self.pending = False
        if not any(k in self.points for k in means):
            self.status = (f"not used: no configuration measured in both this session and the {self.observations} "
                           "prior observations")
            return
        self.offset = 0.0
        self.recalibrate(means)

    def recalibrate(self, means: Mapping[tuple[int, ...], float]) -> None:
        """The offset, from every configuration measured both in this session and in the prior: the mean of this
        session's mean log(time) minus the prior's (the log of the geometric-mean ratio). Only a prior in use."""
        both = [k for k in means if k in self.points]
        if self.offset is None or not both:
            return
        self.offset = sum(means[k] - self.points[k] for k in both) / len(both)
        self.overlap = len(both)
        self.status = (f"used {self.observations} prior observations ({len(self.points)} configurations), "
                       f"rescaled by ×{math.exp(self.offset):.3g} (measured in both: {len(both)})")


def _holds(d: Dimension, v: object) -> bool:
    """Whether the knob can hold ``v``: an integer inside its bounds, a multiple of its quantum."""
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v):
        return False
    n = int(float(v))
    return v == n and d.low <= n <= d.high and n % d.quantum == 0
