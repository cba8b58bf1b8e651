"""``ALTER SYSTEM`` statements, each with its evidence in comments and a rollback twin."""

from __future__ import annotations

from typing import ClassVar

from tuner.emit import host as host_emit
from tuner.emit import quote, ranges, wording
from tuner.emit.twin import label
from tuner.report.model import Recommendation, Report


def alter_system(knob: str, value: int | str) -> str:
    return f"ALTER SYSTEM SET {quote.setting(knob)} = {quote.literal(value)};"


def rollback_system(knob: str, old_value: int | str, source: str) -> str:
    """Undo :func:`alter_system`. A value that came from the built-in default is restored by RESET, which
    also removes the line from postgresql.auto.conf; otherwise the old value is set explicitly."""
    if source == "default":
        return f"ALTER SYSTEM RESET {quote.setting(knob)};"
    return f"ALTER SYSTEM SET {quote.setting(knob)} = {quote.literal(old_value)};"


def alter_tablespace(tablespace: str, knob: str, value: int | str) -> str:
    return f"ALTER TABLESPACE {quote.ident(tablespace)} SET ({quote.setting(knob)} = {quote.literal(value)});"


def rollback_tablespace(tablespace: str, knob: str) -> str:
    """Undo :func:`alter_tablespace` for a tablespace that had no value of its own (it used the server's)."""
    return f"ALTER TABLESPACE {quote.ident(tablespace)} RESET ({quote.setting(knob)});"


def _statements(rec: Recommendation) -> tuple[str, str] | None:
    """The statement that applies a change and the one that takes it back to today's value and its source
    (None: keep, or not SQL — a device's readahead). Raises :class:`quote.Unrenderable`."""
    if rec.decision != "change":
        return None
    if rec.scope == "system":
        return alter_system(rec.knob, rec.recommended), rollback_system(rec.knob, rec.current, rec.source)
    if rec.scope == "tablespace" and rec.object is not None:
        back = (rollback_tablespace(rec.object, rec.knob) if rec.source == "server"
                else alter_tablespace(rec.object, rec.knob, rec.current))
        return alter_tablespace(rec.object, rec.knob, rec.recommended), back
    return None


def apply_sql(rec: Recommendation) -> str | None:
    """The statement that applies a change (None: keep, not SQL, or not writable — see :func:`not_rendered`)."""
    pair = quote.attempt(lambda: _statements(rec))[0]
    return None if pair is None else pair[0]


def rollback_sql(rec: Recommendation) -> str | None:
    """The statement that takes :func:`apply_sql` back to today's value and its source."""
    pair = quote.attempt(lambda: _statements(rec))[0]
    return None if pair is None else pair[1]


def not_rendered(rec: Recommendation) -> str | None:
    """Why a change is written neither as SQL nor as host commands (a name or value from outside that cannot
    be written safely), or None."""
    if rec.scope == "device":
        return host_emit.not_rendered(rec)
    return quote.attempt(lambda: _statements(rec))[1]


def _comment(text: str) -> str:
    return "-- " + quote.one_line(text)


def _evidence(rec: Recommendation) -> list[str]:
    lines = [wording.decided(rec, label(rec)) + (" (change)" if rec.decision == "change" else "")]
    if rec.effect is not None:
        e = rec.effect
        lines.append(
            f"measured: {e.improvement:.2f}x faster ({e.metric}), 95% CI [{e.ci95[0]:.2f}, {e.ci95[1]:.2f}], "
            f"n = {e.n_pairs} pairs, p = {e.p_value:.2g}"
        )
    if rec.near_optimal is not None:
        lines.append(f"near-optimal range: {rec.near_optimal[0]} .. {rec.near_optimal[1]}")
    lines += ranges.notes(rec)
    if rec.together_with:
        lines.append(f"confirmed together with {', '.join(rec.together_with)}: apply both")
    lines.append(f"reason: {rec.reason}")
    return [_comment(line) for line in lines]


def render(report: Report) -> str:
    """recommendation.sql: for psql on the servers. Every piece of outside text is in a one-line comment or
    quoted by :mod:`tuner.emit.quote`, so the statements in it are exactly the ones tuner means."""
    t, s = report.target, report.session
    out = [
        "-- tuner recommendation",
        _comment(f"session {s.id}, {s.started_at:%Y-%m-%d %H:%M:%S} UTC, policy {s.policy}, {s.probes} probes"),
        _comment(f"measured on PostgreSQL {t.server_version} ({t.mode}), host {s.host}, kernel {s.kernel}"),
        "-- ALTER SYSTEM is not replicated: run this on every server that uses the same storage.",
        "",
    ]
    changes = [r for r in report.recommendations if apply_sql(r) or host_emit.commands(r)]
    for rec in report.recommendations:
        out.extend(_evidence(rec))
        host, apply, refused = host_emit.commands(rec), apply_sql(rec), not_rendered(rec)
        if host is not None:
            out.append(_comment(f"on host {s.host}, as root (not SQL): {host.apply_blockdev}"))
            out.append(_comment(f"  persist with the udev rule in 99-tuner-readahead.rules: {host.udev_rule}"))
            out.append(_comment(f"  rollback: {host.rollback_blockdev}"))
        elif apply:
            if rec.run_on == "primary":
                out.append("-- run on the primary: ALTER TABLESPACE cannot run on a standby, and it replicates from there")
            out.append(apply)
            out.append(_comment(f"rollback: {rollback_sql(rec)}"))
        elif refused:
            out.append(_comment(f"not written: {refused}"))
        else:
            out.append("-- keep what you have: no statement.")
        out.append("")
    if any(r.scope == "system" for r in changes):
        out.append("SELECT pg_reload_conf();")
        restart = [r.knob for r in changes if r.requires == "restart"]
        if restart:
            out.append(_comment(f"{', '.join(restart)} take effect only after a restart."))
    if any(r.requires == "reopen" for r in changes):
        out.append("-- readahead reaches files opened after the change: restart PostgreSQL to reach every backend.")
    if not changes:
        out.append("-- nothing to change.")
    return "\n".join(out) + "\n"


def render_rollback(report: Report) -> str:
    s = report.session
    out = [_comment(f"rollback for tuner session {s.id}")]
    changes = []
    for r in report.recommendations:
        host, back, refused = host_emit.commands(r), rollback_sql(r), not_rendered(r)
        if host is not None:
            out.append(_comment(f"on host {s.host}, as root: {host.rollback_blockdev} (see readahead-rollback.sh)"))
        elif back:
            out.append(("-- on the primary:\n" if r.run_on == "primary" else "") + back)
        elif refused:
            out.append(_comment(f"{label(r)}: not written, so nothing to roll back: {refused}"))
        changes += [r] if host or back else []
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
