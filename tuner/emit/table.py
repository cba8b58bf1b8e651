"""The terminal report: a table of recommendations with their evidence, each family's own section (as it renders
itself), what was put back.

Much of it is text from outside (reasons, names, version strings). rich would read ``[...]`` in it as markup —
and a stray ``[/x]`` raises at the very end of a run — so nothing here is printed as a markup string: every line
and cell is a :class:`rich.text.Text` of :func:`tuner.emit.quote.one_line` (no control characters, no escape
sequences for the terminal).
"""

from __future__ import annotations

import io
from typing import ClassVar

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tuner.emit import host as host_emit
from tuner.emit import quote, ranges, sql
from tuner.model import Report


def _text(value: object) -> Text:
    return Text(quote.one_line(value))


def to_table(report: Report, *, width: int = 120) -> str:
    buf = io.StringIO()
    console = Console(file=buf, width=width, force_terminal=False, color_system=None)

    def say(line: str) -> None:
        console.print(_text(line))

    t, s = report.target, report.session
    say(
        f"tuner session {s.id} · PostgreSQL {t.server_version} ({t.mode}) · policy {s.policy} · "
        f"{s.probes} probes in {s.duration_s:.0f} s"
    )
    now = [r for r in report.recommendations if r.requires != "restart"]
    later = [r for r in report.recommendations if r.requires == "restart"]
    for title, recs in ((None, now), ("needs restart (each measured in its own paired trials)", later)):
        if not recs:
            continue
        table = Table(show_lines=False, title=title, title_justify="left")
        # The knob (a device's path after it) and the range ("plateau 1..10000") may wrap; the other cells never
        # do, and a narrow terminal folds those two before it cuts a header short ("decisi…").
        table.add_column("knob")
        for col in ("current", "recommended", "near-optimal", "improvement", "95% CI", "pairs", "decision"):
            table.add_column(col, no_wrap=col != "near-optimal")
        for r in recs:
            e = r.effect
            table.add_row(*map(_text, (
                f"{r.knob} ({r.object})" if r.object else r.knob,
                str(r.current),
                ranges.recommended_cell(r),
                ranges.cell(r),
                f"{e.improvement:.2f}x" if e else "-",
                f"[{e.ci95[0]:.2f}, {e.ci95[1]:.2f}]" if e else "-",
                str(e.n_pairs) if e else "-",
                r.decision.upper() if r.decision == "change" else "keep",
            )))
        console.print(table)
    for r in report.recommendations:
        say(f"{r.knob}{f' ({r.object})' if r.object else ''}: {r.reason}")
        for note in ranges.notes(r):
            say(f"  {note}")
        reload = " SELECT pg_reload_conf();" if r.scope == "system" else ""
        where = "  (on the primary)" if r.run_on == "primary" else ""
        host, apply = host_emit.commands(r), sql.apply_sql(r)
        if host is not None:
            say(f"  apply:    {host.apply_blockdev}   (as root on {report.session.host})")
            say(f"  persist:  {host.udev_rule}")
            say(f"  rollback: {host.rollback_blockdev}")
        elif apply:
            say(f"  apply:    {apply}{reload}{where}")
            say(f"  rollback: {sql.rollback_sql(r)}{reload}")
        elif why := sql.not_rendered(r):
            say(f"  not written: {why}")
        if r.together_with and r.decision == "change":
            say(f"  confirmed together with {', '.join(r.together_with)}: apply both")
    for section in report.sections.values():  # each family's own part, rendered by its model
        for item in section.table():
            if isinstance(item, str):
                say(item)
            else:
                console.print(item)
    for text in report.restored:
        say(f"restored: {text}")
    for f in report.families:
        if f.status != "done":
            say(f"family {f.family}: {f.status} — {f.reason}")
        if f.warm_start:
            say(f"family {f.family}: warm start from {f.warm_start}")
    if not report.recommendations:
        say("No recommendation: nothing could be measured (see the families above).")
    return buf.getvalue()


class TableReport:
    """What a person reads in a terminal (and report.txt)."""

    name: ClassVar[str] = "table"
    stdout: ClassVar[bool] = True

    def render(self, report: Report) -> dict[str, str]:
        return {"report.txt": to_table(report)}
