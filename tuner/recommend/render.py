"""Report renderers and atomic file output."""

from __future__ import annotations

import io
import os
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from tuner.model import Report
from tuner.recommend import sql


def to_json(report: Report) -> str:
    return report.model_dump_json(indent=2) + "\n"


def to_table(report: Report, *, width: int = 120) -> str:
    buf = io.StringIO()
    console = Console(file=buf, width=width, force_terminal=False, color_system=None)
    t, s = report.target, report.session
    console.print(
        f"tuner session {s.id} · PostgreSQL {t.server_version} ({t.mode}) · policy {s.policy} · "
        f"{s.probes} probes in {s.duration_s:.0f} s"
    )
    table = Table(show_lines=False)
    table.add_column("knob", no_wrap=True)
    for col in ("current", "recommended", "near-optimal", "improvement", "95% CI", "pairs", "decision"):
        table.add_column(col, no_wrap=True)
    for r in report.recommendations:
        e = r.effect
        table.add_row(
            r.knob,
            str(r.current),
            str(r.recommended),
            f"{r.near_optimal[0]}..{r.near_optimal[1]}" if r.near_optimal else "-",
            f"{e.improvement:.2f}x" if e else "-",
            f"[{e.ci95[0]:.2f}, {e.ci95[1]:.2f}]" if e else "-",
            str(e.n_pairs) if e else "-",
            r.decision.upper() if r.decision == "change" else "keep",
        )
    console.print(table)
    for r in report.recommendations:
        console.print(f"{r.knob}: {r.reason}")
        if r.apply_sql:
            console.print(f"  apply:    {r.apply_sql} SELECT pg_reload_conf();")
            console.print(f"  rollback: {r.rollback_sql} SELECT pg_reload_conf();")
    for f in report.families:
        if f.status != "done":
            console.print(f"family {f.family}: {f.status} — {f.reason}")
    if not report.recommendations:
        console.print("No recommendation: nothing could be measured (see the families above).")
    return buf.getvalue()


RENDERERS = {"json": to_json, "sql": sql.render, "table": to_table}


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file, fsync and rename: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def write_outputs(report: Report, directory: Path) -> list[Path]:
    """Every format into ``directory``: report.json, recommendation.sql, rollback.sql, report.txt."""
    files = {
        "report.json": to_json(report),
        "recommendation.sql": sql.render(report),
        "rollback.sql": sql.render_rollback(report),
        "report.txt": to_table(report),
    }
    written = []
    for name, text in files.items():
        atomic_write(directory / name, text)
        written.append(directory / name)
    return written
