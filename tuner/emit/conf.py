"""``conf.d/99-tuner.conf``: the server settings as a file for PostgreSQL's ``include_dir``, and its rollback twin.

PostgreSQL reads postgresql.conf top to bottom, the ``include_dir`` files in name order where the directive
stands, and postgresql.auto.conf (ALTER SYSTEM) last; the last value read wins. So a setting in
postgresql.auto.conf, or on a line of postgresql.conf after its ``include_dir``, shadows this file — the file says
so, and which of its settings were read from a configuration file when tuner measured them.

The rollback twin replaces the file: a setting whose value came from a configuration file gets that value back; one
that came from the built-in default (or from something a file does not set) gets no line, so it comes back by
itself. Tablespace and device changes cannot be written here; the file names them and where they go.
"""

from __future__ import annotations

from functools import partial
from typing import ClassVar

from tuner.emit import changes as ch
from tuner.emit import quote
from tuner.emit.twin import ROLLBACK_DIR, ApplyRollback, file_text
from tuner.report.model import Recommendation, Report

FILE = "conf.d/99-tuner.conf"
ROLLBACK_FILE = ROLLBACK_DIR + FILE
WHAT = "a configuration file"


def _lines(rec: Recommendation) -> tuple[str, str | None]:
    """The line that applies ``rec`` and the rollback's line (None: no line). Raises quote.Unrenderable."""
    name = quote.conf_setting(rec.knob)
    back = ch.file_rollback(rec)
    return (f"{name} = {quote.conf_value(rec.recommended)}",
            None if back is None else f"{name} = {quote.conf_value(back)}")


def _header(report: Report, *lines: str) -> list[str]:
    return ["# " + quote.one_line(line) for line in (f"99-tuner.conf: {ch.provenance(report)}", *lines)]


def _shadow_note(rec: Recommendation, report: Report) -> str:
    """What the session saw of the file that sets today's value (pg_settings.sourcefile, in the fingerprint when
    the role could read it): postgresql.auto.conf overrides this file outright."""
    fp = report.target.fingerprint or {}
    seen = (fp.get("settings") or {}).get(rec.knob) or []
    where = str(seen[2]) if len(seen) > 2 and seen[2] else None
    if where and where.rsplit(":", 1)[0].endswith("postgresql.auto.conf"):
        return (f"today's {rec.knob} is set in {where} (ALTER SYSTEM), which is read after include_dir and overrides "
                f"this line: run ALTER SYSTEM RESET {rec.knob}; first")
    if where:
        return (f"today's {rec.knob} is set in {where}: if that line comes after postgresql.conf's include_dir, "
                "it overrides this one — remove it there")
    return (f"today's {rec.knob} was read from a configuration file: if that is postgresql.auto.conf, it overrides "
            f"this line (ALTER SYSTEM RESET {rec.knob}; first)")


def render(report: Report, *, rollback: bool = False) -> str:
    """The file (or, with ``rollback``, :func:`render_rollback`'s twin)."""
    if rollback:
        return render_rollback(report)
    system = ch.changes(report, "system")
    names = ", ".join(quote.literal(r.knob) for r in system if quote.attempt(partial(quote.setting, r.knob))[0])
    out = _header(
        report,
        ch.measured_on(report),
        "Install: put this file in the directory that postgresql.conf's include_dir names (include_dir = 'conf.d'"
        " reads conf.d/ next to postgresql.conf) on every server that uses the same storage, then run "
        "SELECT pg_reload_conf(); tuner export --format conf rewrites the file, so change it there.",
        "Precedence: postgresql.auto.conf (ALTER SYSTEM) is read after include_dir and overrides this file, and so "
        "does any line of postgresql.conf after its include_dir line."
        + (f" What overrides it: SELECT name, setting, sourcefile, sourceline, applied, error FROM pg_file_settings "
           f"WHERE name IN ({names}) ORDER BY seqno;" if names else ""),
        "Rollback: rollback/conf.d/99-tuner.conf in place of this file, then SELECT pg_reload_conf();",
    )
    out.append("")
    top = len(out)
    written = 0
    for rec in ch.changes(report):
        if rec.scope != "system":
            out.append("# " + quote.one_line(ch.elsewhere(rec, WHAT)))
            out.append("")
            continue
        out.append("# " + quote.one_line(ch.evidence(rec, report)))
        lines, why = quote.attempt(partial(_lines, rec))
        notes = [ch.restart_note(rec), ch.source_note(rec)]
        if rec.source == "configuration file":
            notes.append(_shadow_note(rec, report))
        out += ["# " + quote.one_line(n) for n in notes if n]
        if lines is None:
            out.append("# " + quote.one_line(f"not written: {why}"))
        else:
            out.append(lines[0])
            written += 1
        out.append("")
    if not written:
        out[top:top] = ["# " + quote.one_line(ch.empty(report, WHAT, "system")), ""]
    return file_text(out)


def render_rollback(report: Report) -> str:
    out = _header(
        report,
        f"Rollback of session {report.session.id}: install it in place of conf.d/99-tuner.conf, then "
        "SELECT pg_reload_conf(); each setting gets back today's value from where it came from.",
    )
    out.append("")
    written = 0
    for rec in ch.changes(report, "system"):
        lines, why = quote.attempt(partial(_lines, rec))
        if lines is None:
            out.append("# " + quote.one_line(f"{rec.knob}: not written, so nothing to roll back: {why}"))
        elif lines[1] is None:
            came = "the built-in default" if rec.source == "default" else f"'{rec.source}'"
            out.append("# " + quote.one_line(f"{rec.knob}: back to {rec.current}, from {came}: no line here"))
            written += 1
        else:
            out.append("# " + quote.one_line(f"{rec.knob}: back to {rec.current}, as a configuration file set it"))
            out.append(lines[1])
            written += 1
        if lines is not None and (note := ch.restart_note(rec)):
            out.append("# " + quote.one_line(note))
        out.append("")
    if not written:
        out.append("# nothing to roll back.")
    return file_text(out)


class Conf(ApplyRollback):
    """``conf.d/99-tuner.conf`` for ``include_dir``, and its rollback twin."""

    name: ClassVar[str] = "conf"
    parts = ((FILE, render),)
