"""The WAL family's reading of reports written before its scaling runs had a phase of their own (issue #47).

Those reports stored each scaling run (today's settings, and the recommended ones where they differ, at every
client count and transaction size of the curve) as a ``search`` trial, so the HTML report drew them among the
search probes: today's setting read "0.509 ms, median of 11" beside 0.09-0.24 ms probes under a "keep". The runs
are the family's last trials, one or two per point of ``wal_scaling`` in its order, and each carries the load it
ran in its metrics (``clients``, ``rows_per_tx``). Only a tail that matches that sequence exactly is read as
scaling runs; anything else is left as it was stored.
"""

from __future__ import annotations

from tuner.families.wal_sections import Report as Section
from tuner.report.model import Report, Trial

FAMILY = "wal"


def _load(t: Trial) -> tuple[float, float] | None:
    m = t.metrics
    return (m["clients"], m["rows_per_tx"]) if "clients" in m and "rows_per_tx" in m else None


def scaling_tail(report: Report) -> list[int]:
    """Indices into ``report.trials`` of an old report's WAL scaling runs stored as search trials; [] when the
    report has none (a new report's runs are already phase ``scaling``) or its tail does not match the curve."""
    mine = [i for i, t in enumerate(report.trials) if t.family == FAMILY]
    points = [(float(p.clients), float(p.rows_per_tx)) for p in Section.of(report, FAMILY).wal_scaling]
    if not points or any(report.trials[i].phase == "scaling" for i in mine):
        return []
    for per_point in (2, 1):  # with a recommendation to compare, each point ran twice (today, recommended)
        n = per_point * len(points)
        tail = mine[-n:] if len(mine) >= n else []
        expected = [p for p in points for _ in range(per_point)]
        trials = [report.trials[i] for i in tail]
        if (tail and all(t.phase == "search" for t in trials) and any(_load(t) for t in trials)
                and all(_load(t) in (None, want) for t, want in zip(trials, expected, strict=True))):
            return tail
    return []


def upgrade_report(report: Report) -> Report:
    """``report`` with an old report's WAL scaling runs in phase ``scaling``; the same report otherwise."""
    tail = set(scaling_tail(report))
    if not tail:
        return report
    trials = [t.model_copy(update={"phase": "scaling"}) if i in tail else t for i, t in enumerate(report.trials)]
    return report.model_copy(update={"trials": trials})
