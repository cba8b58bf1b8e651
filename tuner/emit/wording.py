"""How every emitter words a decision in prose, so that a "keep" never reads like a change.

"2560 -> 512 (keep)" reads as a change with a footnote; a keep is said as a keep, naming what was searched and
why it did not win. A change is said as ``old -> new``. Plain text; each emitter quotes it its own way.
"""

from __future__ import annotations

from tuner.report.model import Recommendation, Report


def kept(rec: Recommendation, *, why: bool = True) -> str:
    """``keep 2560 (searched 512; not shown better by the minimum effect)`` — or, without ``why``, the short form
    a figure's label has room for. A keep whose candidate is today's value says so instead."""
    if str(rec.recommended) == str(rec.current):
        return f"keep {rec.current}" + (" (no value searched measured better)" if why else "")
    reason = "; not shown better by the minimum effect" if why else ""
    return f"keep {rec.current} (searched {rec.recommended}{reason})"


def decided(rec: Recommendation, label: str, *, arrow: str = "->") -> str:
    """One clause for a decision about ``label``: ``label: 1 -> 256`` for a change, ``label: keep 1 (…)`` for a
    keep."""
    if rec.decision == "change":
        return f"{label}: {rec.current} {arrow} {rec.recommended}"
    return f"{label}: {kept(rec)}"


def improvement_of(report: Report) -> str | None:
    """One line: what an improvement is a ratio of — tuner's probes, on whose queries — so "1.73x" is not read as
    the application's speed-up. None for a report without recommendations."""
    if not report.recommendations:
        return None
    if report.workload == "pg_stat_statements":
        return ("improvement: of your statements that read the most (pg_stat_statements), replayed from a cold cache "
                "and weighted by their share of the read I/O (WAL: of tuner's own inserts)")
    if report.workload == "yours":
        return "improvement: of your [workload] queries, from a cold cache (WAL: of tuner's own inserts)"
    if report.workload == "generated":
        return ("improvement: of scans tuner generated on your largest tables, from a cold cache (WAL: of its own "
                "inserts), not of your application's queries")
    # a report written before it was carried
    return "improvement: of each family's probe workload (its workload in report.json), not of your queries"


def apply_where(report: Report) -> str | None:
    """One line when a change is made with ALTER SYSTEM: it is local to the server it runs on (not replicated), so
    it goes to the primary and every replica. None when no such change is recommended."""
    if not any(r.decision == "change" and r.scope == "system" for r in report.recommendations):
        return None
    here = " (this is a standby)" if report.target.mode == "hot_standby" else ""
    return (f"apply on the primary and on every replica: ALTER SYSTEM is local to one server{here}, not replicated; "
            "or use config management (tuner export)")


def scope_lines(report: Report) -> list[str]:
    """The lines the table and the HTML report print under the recommendations (report.json has them as keys)."""
    return [line for line in (improvement_of(report), apply_where(report)) if line]
