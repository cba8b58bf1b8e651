"""Settings a major version removed for others, and how a value of the old one reads in the new ones — for ``tuner
diff`` across an upgrade, where one session tuned a setting the other server no longer has.

PostgreSQL 19 removed ``io_workers`` (a fixed pool of I/O workers, 18) for a pool that sizes itself: it keeps
``io_min_workers`` running, starts more when a submission finds every worker busy, up to ``io_max_workers``
(commit d1c01b7, "aio: Adjust I/O worker pool automatically"; defaults 2 and 8). A fixed pool of N reads as at least
N always, and no cap below N: ``io_min_workers = N``, ``io_max_workers = max(N, 8)``.
"""

from __future__ import annotations

from typing import Any

from tuner.report.model import Report

REMOVED_IN = 190000
POOL_MAX_DEFAULT = 8


def io_workers_pair(workers: int) -> dict[str, int]:
    """19's pool settings that keep at least the ``workers`` a fixed 18 pool had, growing past them as 19 does."""
    return {"io_min_workers": workers, "io_max_workers": max(workers, POOL_MAX_DEFAULT)}


def upgrade_note(a: Report, b: Report) -> str | None:
    """A sentence mapping the pre-19 session's io_workers (recommended, else in force) onto 19's pair, when exactly
    one of the two sessions ran on 19+; None otherwise."""
    before, after = a.target.server_version_num < REMOVED_IN, b.target.server_version_num < REMOVED_IN
    if before == after:
        return None
    old = a if before else b
    value = _io_workers(old)
    if value is None:
        return None
    pair = io_workers_pair(value)
    return (f"io_workers of session {old.session.id} (PostgreSQL {old.target.server_version}) has no counterpart on "
            f"19, whose I/O worker pool sizes itself: io_workers = {value} reads as io_min_workers = "
            f"{pair['io_min_workers']}, io_max_workers = {pair['io_max_workers']} (at least as many workers, "
            "more when reads wait for one)")


def _io_workers(report: Report) -> int | None:
    rec = next((r for r in report.recommendations if r.knob == "io_workers"), None)
    value: Any = (rec.recommended if rec.decision == "change" else rec.current) if rec is not None else \
        ((report.target.fingerprint or {}).get("settings") or {}).get("io_workers", [None])[0]
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
