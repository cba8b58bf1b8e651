"""What each query of a multi-query workload gains: its own paired interval from the confirmation's pairs.

The confirmation pairs whole probes (:func:`tuner.core.loops.confirm`); every ok probe of a scan workload also
carries each query's own execution time (``Trial.query_ms``). The same pairs, read per query, give each query its
paired log-ratios, and the same sequential test's intervals at the look where the whole confirmation stopped
(:meth:`tuner.core.stats.SequentialTest.effect`): a query's ``ci95`` is at the level the workload's is, so the
lines read like the overall effect. A query's interval is not a decision — the workload's is — and with several
queries each one's coverage holds for itself, not for all of them together. Pure: no I/O.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from tuner.core.stats import SequentialTest, log_ratio
from tuner.report.model import QueryEffect, Trial


def effects(pairs: Sequence[tuple[Trial, Trial]], test: SequentialTest, *, looks_done: int) -> list[QueryEffect]:
    """Each query's effect over ``pairs`` (baseline trial, candidate trial), in the order the trials name them;
    none for a workload of one query (its effect is the workload's) or where fewer than two pairs carry it. A
    query with a time of zero in any pair (nothing to take a ratio of) has no line."""
    names: list[str] = []
    for b, c in pairs:
        for n in (*b.query_ms, *c.query_ms):
            if n not in names:
                names.append(n)
    if len(names) < 2:
        return []
    kept: dict[str, tuple[list[float], list[float], list[float]]] = {}
    for name in names:
        base = [b.query_ms.get(name) for b, _ in pairs]
        cand = [c.query_ms.get(name) for _, c in pairs]
        both = [(x, y) for x, y in zip(base, cand, strict=True) if x is not None and y is not None]
        if len(both) < 2 or any(x <= 0 or y <= 0 for x, y in both):
            continue
        kept[name] = ([x for x, _ in both], [y for _, y in both], [log_ratio(x, y) for x, y in both])
    total = sum(statistics.median(b) for b, _, _ in kept.values())
    out = []
    for name, (base_ms, cand_ms, d) in kept.items():
        e = test.effect(d, looks_done)
        out.append(QueryEffect(
            name=name, baseline_ms=round(statistics.median(base_ms), 3), candidate_ms=round(statistics.median(cand_ms), 3),
            time_share=round(statistics.median(base_ms) / total, 4) if total > 0 else 0.0,
            improvement=round(e.improvement, 4), ci95=(round(e.ci_low, 4), round(e.ci_high, 4)),
            decision_ci=(round(e.decision_low, 4), round(e.decision_high, 4)), n_pairs=e.n_pairs))
    return out
