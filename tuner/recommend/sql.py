"""``ALTER SYSTEM`` statements, each with its evidence in comments and a rollback twin."""

from __future__ import annotations

from tuner.model import RecommendationOut, Report


def _ident(name: str) -> str:
    if not name.replace("_", "").isalnum():
        raise ValueError(f"not a setting name: {name!r}")
    return name


def alter_system(knob: str, value: int) -> str:
    return f"ALTER SYSTEM SET {_ident(knob)} = {int(value)};"


def rollback_system(knob: str, old_value: int, source: str) -> str:
    """Undo :func:`alter_system`. A value that came from the built-in default is restored by RESET, which
    also removes the line from postgresql.auto.conf; otherwise the old value is set explicitly."""
    if source == "default":
        return f"ALTER SYSTEM RESET {_ident(knob)};"
    return f"ALTER SYSTEM SET {_ident(knob)} = {int(old_value)};"


def _evidence(rec: RecommendationOut, report: Report) -> list[str]:
    lines = [f"-- {rec.knob}: {rec.current} -> {rec.recommended} ({rec.decision})"]
    if rec.effect is not None:
        e = rec.effect
        lines.append(
            f"-- measured: {e.improvement:.2f}x faster ({e.metric}), 95% CI [{e.ci95[0]:.2f}, {e.ci95[1]:.2f}], "
            f"n = {e.n_pairs} pairs, p = {e.p_value:.2g}"
        )
    if rec.near_optimal is not None:
        lines.append(f"-- near-optimal range: {rec.near_optimal[0]} .. {rec.near_optimal[1]}")
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
    changes = [r for r in report.recommendations if r.decision == "change" and r.apply_sql]
    for rec in report.recommendations:
        out.extend(_evidence(rec, report))
        if rec.decision == "change" and rec.apply_sql:
            out.append(rec.apply_sql)
            out.append(f"-- rollback: {rec.rollback_sql}")
        else:
            out.append("-- keep what you have: no statement.")
        out.append("")
    if changes:
        out.append("SELECT pg_reload_conf();")
        restart = [r.knob for r in changes if r.requires == "restart"]
        if restart:
            out.append(f"-- {', '.join(restart)} take effect only after a restart.")
    else:
        out.append("-- nothing to change.")
    return "\n".join(out) + "\n"


def render_rollback(report: Report) -> str:
    changes = [r for r in report.recommendations if r.decision == "change" and r.rollback_sql]
    out = [f"-- rollback for tuner session {report.session.id}"]
    out.extend(r.rollback_sql for r in changes if r.rollback_sql)
    out.append("SELECT pg_reload_conf();" if changes else "-- nothing to roll back.")
    return "\n".join(out) + "\n"
