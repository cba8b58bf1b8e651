"""Where a search starts: the initial design, and a space-filling alternative."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence

from tuner.optimiser.space import Point, Dimension


def initial_design(
    dimensions: Sequence[Dimension],
    current: Mapping[str, int],
    starts: Mapping[str, Sequence[int]],
    *,
    today: bool = True,
) -> list[Point]:
    """Today's values first (they are the baseline anyway), then the policy's starting values: for one knob
    the values themselves; for several, every combination of them (3 × 3 = 9 points for two knobs), which
    puts the special values — concurrency 0, the kernel's readahead — on the grid.

    ``today=False`` leaves today's values out (a knob without starting values still starts at today's): the
    model then probes them only where it asks for them, like any other value. The confirmation measures them
    in any case."""
    def clamp(d: Dimension, v: int) -> int:
        return d.snap(v)

    design = [{d.name: clamp(d, current[d.name]) for d in dimensions}]
    per_dim = [[clamp(d, v) for v in starts.get(d.name, ())] or [clamp(d, current[d.name])] for d in dimensions]
    for combo in itertools.product(*per_dim):
        design.append({d.name: v for d, v in zip(dimensions, combo)})
    return design if today else design[1:]


def space_filling(dimensions: Sequence[Dimension], n: int) -> list[Point]:
    """``n`` deterministic, evenly spread points (a Fibonacci lattice in the transformed space), avoiding the
    edges where single bad values sit (readahead 0, concurrency 1)."""
    golden = (math.sqrt(5) - 1) / 2
    points: list[Point] = []
    for i in range(n):
        fracs = [(i + 0.5) / n] + [((i + 0.5) * golden * (k + 1)) % 1.0 for k in range(len(dimensions) - 1)]
        points.append({d.name: d.from_z(d.z_low + (0.1 + 0.8 * f) * (d.z_high - d.z_low)) for d, f in zip(dimensions, fracs)})
    return points
