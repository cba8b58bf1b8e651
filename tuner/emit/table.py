"""The terminal report: a table of recommendations with their evidence, each family's own section (as it renders
itself), what was put back.

It is a list of sections (:data:`SECTIONS`), each a function that writes its part of one report to a
:class:`~tuner.emit.terminal.Out`; a new part of the report is one function and one entry in the list.

Everything fits the width it is given (:class:`tuner.emit.terminal.Terminal`): lines wrap with a hanging indent,
and a table too wide even with its wrappable cells folded is printed as one stanza per row instead of with cut
cells. Decisions are coloured when the terminal takes colour; report.txt and ``--format table`` into a pipe are
plain, at 120 columns.

Much of it is text from outside (reasons, names, version strings). rich would read ``[...]`` in it as markup —
and a stray ``[/x]`` raises at the very end of a run — so nothing here is printed as a markup string: every line
and cell is a :class:`rich.text.Text` of :func:`tuner.emit.quote.one_line` (no control characters, no escape
sequences for the terminal).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from tuner.emit import host as host_emit
from tuner.emit import query_lines, ranges, sql, wording
from tuner.emit.terminal import Out, Row, Terminal, TextTable
from tuner.report.model import Recommendation, Report


def _header(report: Report, out: Out) -> None:
    t, s = report.target, report.session
    out.say(f"tuner session {s.id} · PostgreSQL {t.server_version} ({t.mode}) · policy {s.policy} · "
            f"{s.probes} probes in {s.duration_s:.0f} s")


_EFFECT = "improvement (95% CI)"
_COLUMNS = ("knob", "current", "recommended", "near-optimal", _EFFECT, "pairs", "decision")
# The knob (a device's path after it), the range ("plateau 1..10000") and the effect with its interval may wrap
# at their spaces; the other cells never do. So the table fits 100 columns for the shipped knobs, and a narrower
# terminal gets a stanza per recommendation.
_WRAPS = frozenset({"knob", "near-optimal", _EFFECT})


def _label(r: Recommendation) -> str:
    return f"{r.knob} ({r.object})" if r.object else r.knob


def _row(r: Recommendation) -> Row:
    e = r.effect
    decision = "CHANGE" if r.decision == "change" else "keep"
    return Row(cells=(
        _label(r), str(r.current), ranges.recommended_cell(r), ranges.cell(r),
        # The interval as one word, so a narrow column puts it under the improvement rather than splitting it.
        f"{e.improvement:.2f}x [{e.ci95[0]:.2f}–{e.ci95[1]:.2f}]" if e else "-",
        str(e.n_pairs) if e else "-", decision,
    ), styles={6: r.decision}, stanza=_stanza(r))


def _stanza(r: Recommendation) -> list[tuple[str, str | None]]:
    """The row as lines for a terminal too narrow for the table: the decision first, then its evidence."""
    e = r.effect
    if r.decision == "change":
        first = (f"{_label(r)}: CHANGE {r.current} -> {ranges.recommended_cell(r)}", "change")
    else:
        first = (f"{_label(r)}: {wording.kept(r, why=False)}", "keep")
    evidence = [f"{e.improvement:.2f}x, 95% CI [{e.ci95[0]:.2f}, {e.ci95[1]:.2f}], {e.n_pairs} pairs"] if e else []
    if r.near_optimal is not None:
        evidence.append(f"near-optimal {ranges.cell(r)}")
    return [first] + ([("  " + "; ".join(evidence), None)] if evidence else [])


def _recommendations(report: Report, out: Out) -> None:
    now = [r for r in report.recommendations if r.requires != "restart"]
    later = [r for r in report.recommendations if r.requires == "restart"]
    for title, recs in ((None, now), ("needs restart (each measured in its own paired trials)", later)):
        if recs:
            out.table(title, _COLUMNS, [_row(r) for r in recs], wraps=_WRAPS)


def _scope(report: Report, out: Out) -> None:
    """What the improvement figures are ratios of, and where the changes go."""
    for line in wording.scope_lines(report):
        out.say(line)


def _notes(report: Report, out: Out) -> None:
    for r in report.recommendations:
        out.say(f"{_label(r)}: {r.reason}")
        for note in ranges.notes(r):
            out.say(f"  {note}")
        reload = " SELECT pg_reload_conf();" if r.scope == "system" else ""
        where = "  (on the primary)" if r.run_on == "primary" else ""
        host, apply = host_emit.commands(r), sql.apply_sql(r)
        if host is not None:
            out.say(f"  apply:    {host.apply_blockdev}   (as root on {report.session.host})")
            out.say(f"  persist:  {host.udev_rule}")
            out.say(f"  rollback: {host.rollback_blockdev}")
        elif apply:
            out.say(f"  apply:    {apply}{reload}{where}")
            out.say(f"  rollback: {sql.rollback_sql(r)}{reload}")
        elif why := sql.not_rendered(r):
            out.say(f"  not written: {why}")
        if r.together_with and r.decision == "change":
            out.say(f"  confirmed together with {', '.join(r.together_with)}: apply both")



_QUERY_COLUMNS = ("query", "share", "today ms", "recommended ms", "ratio (95% CI)", "pairs")


def _queries(report: Report, out: Out) -> None:
    """What each query of the workload gains (:mod:`tuner.emit.query_lines`), and the statements left out."""
    for group in query_lines.groups(report):
        rows = [Row(cells=(
            f"{q.who()} {q.text}".strip(), f"{q.share:.0%} of {q.share_of}", f"{q.today_ms:.1f}",
            f"{q.recommended_ms:.1f}", f"{q.improvement:.2f}x [{q.ci95[0]:.2f}–{q.ci95[1]:.2f}]", str(q.n_pairs),
        ), stanza=[(query_lines.sentence(q), None)]) for q in group.lines]
        out.table(group.title, _QUERY_COLUMNS, rows, wraps=frozenset({"query", "share", "ratio (95% CI)"}))
    for s in report.left_out:
        out.say(query_lines.left_out(s))


def _sections(report: Report, out: Out) -> None:
    """Each family's own part of the report, as its section model renders it (lines and tables)."""
    for section in report.sections.values():
        for item in section.table():
            if isinstance(item, TextTable):
                out.table(item.title, item.columns, [Row(cells=r) for r in item.rows], wraps=item.wraps,
                          right=item.right)
            else:
                out.say(str(item))


def _io(report: Report, out: Out) -> None:
    if report.device_profile is not None:
        out.say(f"device profile: {report.device_profile}")
    for regime in report.io_regime:
        out.say(f"I/O regime{f' ({regime.family})' if regime.family else ''}: {regime.sentence}")


def _restored(report: Report, out: Out) -> None:
    for text in report.restored:
        out.say(f"restored: {text}")


def _families(report: Report, out: Out) -> None:
    for f in report.families:
        if f.status != "done":
            head = f"family {f.family}: "
            out.say(f"{head}{f.status} — {f.reason}", mark=(len(head), len(head) + len(f.status), f.status))
        if f.warm_start:
            out.say(f"family {f.family}: warm start from {f.warm_start}")
    if not report.recommendations:
        out.say("No recommendation: nothing could be measured (see the families above).")


Section = Callable[[Report, Out], None]
SECTIONS: list[Section] = [_header, _recommendations, _scope, _queries, _notes, _sections, _io, _restored, _families]


def to_table(report: Report, terminal: Terminal | None = None) -> str:
    """The report as text for ``terminal`` (default: report.txt's — 120 columns, no colour)."""
    out = Out(terminal or Terminal())
    for section in SECTIONS:
        section(report, out)
    return out.text()


class TableReport:
    """What a person reads in a terminal (and report.txt)."""

    name: ClassVar[str] = "table"
    stdout: ClassVar[bool] = True

    def render(self, report: Report) -> dict[str, str]:
        return {"report.txt": to_table(report)}

    def on_terminal(self, report: Report, terminal: Terminal) -> str:
        """What ``--format table`` prints on ``terminal``: its width, its colours."""
        return to_table(report, terminal)
