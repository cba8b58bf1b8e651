"""What each query gains, as every format shows it: the per-query lines of each confirmed effect joined with the
queries' identities (``FamilyOutcome.statements``: name, ``queryid``, shortened text, share of read I/O), and the
statements the workload left out. The table, the HTML report, the JSON report and the daemon's API all read these,
so they say the same thing."""

from __future__ import annotations

from dataclasses import dataclass

from tuner.report.model import EffectOut, LeftOutStatement, QueryEffect, Recommendation, Report, StatementOut


@dataclass(frozen=True)
class QueryLine:
    """One query of one confirmation: who it is, how much of the workload it is, its times and its interval."""

    name: str
    queryid: int | None
    text: str
    share: float  # of the workload's read I/O where known (share_of "read I/O"), else of its time today
    share_of: str  # "read I/O" or "time today"
    today_ms: float
    recommended_ms: float
    improvement: float
    ci95: tuple[float, float]
    n_pairs: int

    def who(self) -> str:
        return f"{self.name} (queryid {self.queryid})" if self.queryid is not None else self.name


@dataclass(frozen=True)
class QueryGroup:
    """The per-query lines of one confirmed effect, and what it compared (``title``)."""

    title: str
    lines: list[QueryLine]


def statements(report: Report) -> dict[str, StatementOut]:
    """Every family's workload queries by name (the first family to name one wins: the same query, probed by two)."""
    out: dict[str, StatementOut] = {}
    for f in report.families:
        for s in f.statements:
            out.setdefault(s.name, s)
    return out


def _line(q: QueryEffect, who: StatementOut | None) -> QueryLine:
    io_share = who.share if who is not None else None
    return QueryLine(
        name=q.name, queryid=who.queryid if who else None, text=who.text if who else "",
        share=io_share if io_share is not None else q.time_share,
        share_of="read I/O" if io_share is not None else "time today", today_ms=q.baseline_ms, recommended_ms=q.candidate_ms,
        improvement=q.improvement, ci95=q.ci95, n_pairs=q.n_pairs)


def _title(recs: list[Recommendation]) -> str:
    what = ", ".join(f"{r.knob}{f' ({r.object})' if r.object else ''} {r.current} -> {r.recommended}" for r in recs)
    return f"per query: {what} ({recs[0].decision})"


def groups(report: Report) -> list[QueryGroup]:
    """One group per distinct confirmed effect with per-query lines: the families' sections' own first (a read path
    confirmed as one, against today's: ``ReportSection.confirmed``), then the recommendations' in their order
    (knobs that share one confirmation share one group)."""
    who = statements(report)
    titled: dict[str, tuple[EffectOut, str]] = {}
    for section in report.sections.values():
        for title, effect in section.confirmed():
            titled.setdefault(effect.model_dump_json(), (effect, title))
    by_effect: dict[str, tuple[EffectOut, list[Recommendation]]] = {}
    for r in report.recommendations:
        if r.effect is not None and r.effect.queries and r.effect.model_dump_json() not in titled:
            by_effect.setdefault(r.effect.model_dump_json(), (r.effect, []))[1].append(r)
    groups = [(effect, title) for effect, title in titled.values()]
    groups += [(effect, _title(recs)) for effect, recs in by_effect.values()]
    return [QueryGroup(title, [_line(q, who.get(q.name)) for q in effect.queries]) for effect, title in groups]


def sentence(line: QueryLine) -> str:
    """The line as one sentence: "custom query 1 'SELECT …' (62% of time today): 812.4 ms today, 301.0 ms at the
    recommendation, 2.70x [2.41–3.02], 6 pairs"."""
    text = f" '{line.text}'" if line.text else ""
    return (f"{line.who()}{text} ({line.share:.0%} of {line.share_of}): {line.today_ms:.1f} ms today, "
            f"{line.recommended_ms:.1f} ms at the recommendation, {line.improvement:.2f}x "
            f"[{line.ci95[0]:.2f}–{line.ci95[1]:.2f}], {line.n_pairs} pairs")


def left_out(s: LeftOutStatement) -> str:
    """"left out: queryid 42 'UPDATE …' (3% of read I/O): it writes"."""
    who = f"queryid {s.queryid}" if s.queryid is not None else "a statement"
    share = f" ({s.share:.0%} of read I/O)" if s.share is not None else ""
    return f"left out: {who} '{s.text}'{share}: {s.reason}"
