"""The terminal report: a table of recommendations with their evidence, devices, WAL scaling, what was put back.

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
    for d in report.devices:
        line = f"device {d.device or '-'} ({', '.join(d.roles)}): {d.status}"
        if d.status == "probed":
            figures = []
            if d.raw_read_mb_s is not None:
                figures.append(f"raw O_DIRECT read {d.raw_read_mb_s:.0f} MB/s")
            if d.seq_scan_mb_s_current is not None:
                rec_txt = f" -> {d.seq_scan_mb_s_recommended:.0f}" if d.seq_scan_mb_s_recommended is not None else ""
                figures.append(f"seq scan {d.seq_scan_mb_s_current:.0f}{rec_txt} MB/s")
            if d.efficiency_current is not None:
                rec_eff = f" -> {d.efficiency_recommended:.0%}" if d.efficiency_recommended is not None else ""
                figures.append(f"efficiency {d.efficiency_current:.0%}{rec_eff}")
            line += (": " + ", ".join(figures)) if figures else ""
        else:
            line += f" — {d.reason}"
        say(line)
    if report.wal_scaling:
        wt = Table(title="WAL scaling: TPS and where load backends waited (today's settings)", title_justify="left")
        for col in ("clients", "rows/tx", "TPS today", "TPS recommended", "insert locks", "WAL write", "WAL sync"):
            wt.add_column(col, no_wrap=True, justify="right")
        for sc, co in zip(report.wal_scaling, report.wal_contention, strict=False):
            pct = lambda v: "-" if v is None else f"{v:.0%}"  # noqa: E731
            wt.add_row(*map(_text, (
                str(sc.clients), str(sc.rows_per_tx), f"{sc.tps_current:.0f}" if sc.tps_current else "-",
                f"{sc.tps_recommended:.0f}" if sc.tps_recommended else "-", pct(co.wal_insert_wait_share),
                pct(co.wal_write_wait_share), pct(co.wal_sync_wait_share))))
        console.print(wt)
    if report.wal_summary:
        say(report.wal_summary)
    if report.replay is not None:
        r = report.replay

        def rate(v: float | None) -> str:
            return "-" if v is None else f"{v:.2f}"

        say(f"replay: {rate(r.mb_per_s_current)} MB/s of WAL at maintenance_io_concurrency = "
            f"{r.maintenance_io_concurrency_current} today, {rate(r.mb_per_s_recommended)} MB/s at "
            f"{r.maintenance_io_concurrency_recommended} (recommended); {r.pages} random pages per "
            f"{rate(r.wal_mb)} MB stream; recovery_prefetch = {r.recovery_prefetch}")
    if report.device_profile is not None:
        say(f"device profile: {report.device_profile}")
    for regime in report.io_regime:
        say(f"I/O regime{f' ({regime.family})' if regime.family else ''}: {regime.sentence}")
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
