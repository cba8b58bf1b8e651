"""``ALTER SYSTEM`` statements, each with its evidence in comments and a rollback twin."""

from __future__ import annotations

from typing import ClassVar

from tuner.emit import host as host_emit
from tuner.model import Recommendation, Report


def _ident(name: str) -> str:
    if not name.replace("_", "").isalnum():
        raise ValueError(f"not a setting name: {name!r}")
    return name


def _literal(value: int | str) -> str:
    """A setting's value as SQL: integers bare, enum values (wal_compression = 'lz4') as quoted literals."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    text = str(value)
    if text.lstrip("-").isdigit():
        return str(int(text))
    return "'" + text.replace("'", "''") + "'"


def alter_system(knob: str, value: int | str) -> str:
    return f"ALTER SYSTEM SET {_ident(knob)} = {_literal(value)};"


def rollback_system(knob: str, old_value: int | str, source: str) -> str:
    """Undo :func:`alter_system`. A value that came from the built-in default is restored by RESET, which
    also removes the line from postgresql.auto.conf; otherwise the old value is set explicitly."""
    if source == "default":
        return f"ALTER SYSTEM RESET {_ident(knob)};"
    return f"ALTER SYSTEM SET {_ident(knob)} = {_literal(old_value)};"


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"' if not (name.isidentifier() and name.islower()) else name


def alter_tablespace(tablespace: str, knob: str, value: int) -> str:
    return f"ALTER TABLESPACE {_quote_ident(tablespace)} SET ({_ident(knob)} = {int(value)});"


def rollback_tablespace(tablespace: str, knob: str) -> str:
    """Undo :func:`alter_tablespace` for a tablespace that had no value of its own (it used the server's)."""
    return f"ALTER TABLESPACE {_quote_ident(tablespace)} RESET ({_ident(knob)});"


def apply_sql(rec: Recommendation) -> str | None:
    """The statement that applies a change (None: keep, or not SQL — a device's readahead)."""
    if rec.decision != "change":
        return None
    if rec.scope == "system":
        return alter_system(rec.knob, rec.recommended)
    if rec.scope == "tablespace" and rec.object is not None:
        return alter_tablespace(rec.object, rec.knob, int(rec.recommended))
    return None


def rollback_sql(rec: Recommendation) -> str | None:
    """The statement that takes :func:`apply_sql` back to today's value and its source."""
    if rec.decision != "change":
        return None
    if rec.scope == "system":
        return rollback_system(rec.knob, rec.current, rec.source)
    if rec.scope == "tablespace" and rec.object is not None:
        if rec.source == "server":
            return rollback_tablespace(rec.object, rec.knob)
        return alter_tablespace(rec.object, rec.knob, int(rec.current))
    return None


def _label(rec: Recommendation) -> str:
    if rec.scope == "tablespace":
        return f"{rec.knob} of tablespace {rec.object}"
    if rec.scope == "device":
        return f"{rec.knob} of {rec.object}"
    return rec.knob


def _evidence(rec: Recommendation, report: Report) -> list[str]:
    lines = [f"-- {_label(rec)}: {rec.current} -> {rec.recommended} ({rec.decision})"]
    if rec.effect is not None:
        e = rec.effect
        lines.append(
            f"-- measured: {e.improvement:.2f}x faster ({e.metric}), 95% CI [{e.ci95[0]:.2f}, {e.ci95[1]:.2f}], "
            f"n = {e.n_pairs} pairs, p = {e.p_value:.2g}"
        )
    if rec.near_optimal is not None:
        lines.append(f"-- near-optimal range: {rec.near_optimal[0]} .. {rec.near_optimal[1]}")
    if rec.together_with:
        lines.append(f"-- confirmed together with {', '.join(rec.together_with)}: apply both")
    lines.append(f"-- reason: {rec.reason}")
    return lines


def render(report: Report) -> str:
    t, s = report.target, report.session
    out = [
        "-- tuner recommendation",
        f"-- session {s.id}, {s.started_at:%Y-%m-%d %H:%M:%S} UTC, policy {s.policy}, {s.probes} probes",
        f"-- measured on PostgreSQL {t.server_version} ({t.mode}), host {s.host}, kernel {s.kernel}",
        "-- ALTER SYSTEM is not replicated: run this on every server that uses the same storage.",
        "",
    ]
    changes = [r for r in report.recommendations if apply_sql(r) or host_emit.commands(r)]
    for rec in report.recommendations:
        out.extend(_evidence(rec, report))
        host, apply = host_emit.commands(rec), apply_sql(rec)
        if host is not None:
            out.append(f"-- on host {s.host}, as root (not SQL): {host.apply_blockdev}")
            out.append(f"--   persist with the udev rule in 99-tuner-readahead.rules: {host.udev_rule}")
            out.append(f"--   rollback: {host.rollback_blockdev}")
        elif apply:
            if rec.run_on == "primary":
                out.append("-- run on the primary: ALTER TABLESPACE cannot run on a standby, and it replicates from there")
            out.append(apply)
            out.append(f"-- rollback: {rollback_sql(rec)}")
        else:
            out.append("-- keep what you have: no statement.")
        out.append("")
    if any(r.scope == "system" for r in changes):
        out.append("SELECT pg_reload_conf();")
        restart = [r.knob for r in changes if r.requires == "restart"]
        if restart:
            out.append(f"-- {', '.join(restart)} take effect only after a restart.")
    if any(r.requires == "reopen" for r in changes):
        out.append("-- readahead reaches files opened after the change: restart PostgreSQL to reach every backend.")
    if not changes:
        out.append("-- nothing to change.")
    return "\n".join(out) + "\n"


def render_rollback(report: Report) -> str:
    changes = [r for r in report.recommendations if rollback_sql(r) or host_emit.commands(r)]
    out = [f"-- rollback for tuner session {report.session.id}"]
    for r in changes:
        host, back = host_emit.commands(r), rollback_sql(r)
        if host is not None:
            out.append(f"-- on host {report.session.host}, as root: {host.rollback_blockdev} (see readahead-rollback.sh)")
        elif back:
            out.append(("-- on the primary:\n" if r.run_on == "primary" else "") + back)
    if any(r.scope == "system" for r in changes):
        out.append("SELECT pg_reload_conf();")
    if not changes:
        out.append("-- nothing to roll back.")
    return "\n".join(out) + "\n"


class Sql:
    """``ALTER SYSTEM`` / ``ALTER TABLESPACE`` with evidence, and the rollback twin."""

    name: ClassVar[str] = "sql"
    stdout: ClassVar[bool] = True

    def render(self, report: Report) -> dict[str, str]:
        return {"recommendation.sql": render(report), "rollback.sql": render_rollback(report)}
