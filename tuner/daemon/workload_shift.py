"""Whether the workload changed between two drift checks: the top statements by read I/O (pg_stat_statements'
``shared_blks_read``, :func:`tuner.target.fingerprint.observe` with ``statements=True``) compared as two
distributions of shares. Pure, so it is tested without a server; :mod:`tuner.daemon.drift` turns a shift into a
change that re-probes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tuner.target.fingerprint import TOP_STATEMENTS

# A drift when the total variation distance between the two top-statement share distributions exceeds this: at
# least 30 % of the read I/O the top statements stood for moved to other statements (or between them). The probe's
# objective weights each statement by its share of read I/O (issue #56 item 3), so a shift that large would have
# weighted the measured queries differently enough to move the optimum, and the recommendation was tuned on a
# workload that no longer runs. Below it, the day-to-day wobble of one mix's shares (a batch job's week, a report
# run twice) is not worth a re-probe of every family. A statement that merely swaps rank with its neighbour moves
# little distance; a top that is mostly new statements moves nearly all of its coverage.
SHIFT_THRESHOLD = 0.3


@dataclass(frozen=True)
class Shift:
    """How the top statements moved: how many of today's top are new, and the distance between the shares."""

    new: int  # statements in today's top that were not in the baseline's
    top: int  # statements in today's top (at most TOP_STATEMENTS)
    distance: float  # total variation distance between the two distributions of shares, 0..1

    @property
    def drifted(self) -> bool:
        return self.distance > SHIFT_THRESHOLD

    def sentence(self) -> str:
        """"workload changed: 3 of the top 5 statements are new (the read I/O shares moved by 0.62, more than
        0.3)"."""
        were = "is" if self.new == 1 else "are"
        return (f"workload changed: {self.new} of the top {self.top} statements {were} new (the read I/O shares "
                f"moved by {self.distance:.2f}, more than {SHIFT_THRESHOLD:g})")


def shift(before: Mapping[str, float], after: Mapping[str, float]) -> Shift:
    """The shift from ``before`` to ``after``, each ``{queryid: share of the read I/O}`` of the top statements (a
    statement outside a top counts as a share of 0 there)."""
    names = before.keys() | after.keys()
    distance = 0.5 * sum(abs(float(after.get(q, 0.0)) - float(before.get(q, 0.0))) for q in names)
    return Shift(new=len(after.keys() - before.keys()), top=len(after), distance=round(distance, 4))


def top(fp: Mapping[str, object]) -> dict[str, float] | None:
    """A drift fingerprint's top statements (``{queryid: share}``), None where it has none (not asked for, or
    pg_stat_statements unreadable: then nothing is compared, as unreadable is not changed)."""
    statements = fp.get("statements")
    if not isinstance(statements, Mapping) or not isinstance(statements.get("top"), Mapping):
        return None
    out = {str(k): float(v) for k, v in statements["top"].items() if isinstance(v, (int, float))}
    return dict(sorted(out.items(), key=lambda kv: -kv[1])[:TOP_STATEMENTS])


def carried(before: Mapping[str, object] | None, after: dict[str, object]) -> dict[str, object]:
    """The next baseline: ``after``, but with the baseline's top statements where both have them and they did not
    drift — so a workload that shifts a little at each check is compared with the one last measured (the first
    observation, or the one that last drifted), and its shift adds up until it crosses the threshold."""
    if before is None:
        return after
    old, new = top(before), top(after)
    if old is None or new is None or shift(old, new).drifted:
        return after
    return {**after, "statements": before["statements"]}
