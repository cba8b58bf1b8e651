"""What the config-management formats share (conf, ansible, patroni, cnpg, zalando, udev, tuned).

A format carries only the report's "change" decisions, each with its evidence — improvement, 95 % interval,
pairs, session and date, every number as the report has it — and a provenance marker; its rollback twin puts
back today's values. "Keep what you have" is an empty change set that says so. A change a format cannot express
(a tablespace's setting in a server-wide file, a device's readahead on a database server) is named in a comment
with where it goes instead; a name or value that cannot be written safely is named with the reason.

The files that set readahead on the host (udev, tuned) share their body and its rollback twin's
(:func:`device_entries`): one entry per device change, each under its evidence (or, in the rollback, the value it
goes back to), a change meant for PostgreSQL named with where it goes instead, and a sentence where nothing is
written.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial

from tuner.emit import host as host_emit
from tuner.emit import quote, sql
from tuner.emit.twin import label
from tuner.report.model import Recommendation, Report

MANAGED_BY = "managed by tuner"

# pg_settings.source values that take precedence over the configuration files (guc.h GucSource, from
# PGC_S_ARGV up): a value from one of them is not what a configuration file says.
ABOVE_FILES = frozenset({"command line", "global", "database", "user", "database user", "client", "override",
                         "interactive", "test", "session"})


def changes(report: Report, *scopes: str) -> list[Recommendation]:
    """The report's "change" decisions (of ``scopes`` only, when given), in the report's order."""
    return [r for r in report.recommendations if r.decision == "change" and (not scopes or r.scope in scopes)]


def provenance(report: Report) -> str:
    s = report.session
    return f"{MANAGED_BY}, session {s.id} ({s.started_at:%Y-%m-%d %H:%M:%S} UTC)"


def measured_on(report: Report) -> str:
    t, s = report.target, report.session
    return (f"measured on PostgreSQL {t.server_version} ({t.mode}), host {s.host}, kernel {s.kernel}, "
            f"policy {s.policy}, {s.probes} probes")


def evidence(rec: Recommendation, report: Report) -> str:
    """One line: what changes, how much faster it measured, the interval, the pairs, the session and its date."""
    s = report.session
    parts = [f"{label(rec)}: {rec.current} -> {rec.recommended}"]
    if rec.effect is not None:
        e = rec.effect
        parts.append(f"{e.improvement:.2f}x faster ({e.metric}), 95% CI [{e.ci95[0]:.2f}, {e.ci95[1]:.2f}], "
                     f"{e.n_pairs} pairs")
    parts.append(f"session {s.id}, {s.started_at:%Y-%m-%d}")
    if rec.together_with:
        parts.append(f"confirmed together with {', '.join(rec.together_with)}: apply them together")
    return "; ".join(parts)


def empty(report: Report, what: str, *scopes: str) -> str:
    """The sentence of an empty change set: nothing measured, keep what you have (everywhere, or for the
    ``scopes`` this format expresses), or nothing of this kind to change."""
    sid = report.session.id
    if not report.recommendations:
        return f"no recommendation: session {sid} could measure nothing, so there is nothing to change"
    if not changes(report):
        return f"keep what you have: no change earned its evidence in session {sid}, so there is nothing to change"
    kept = [label(r) for r in report.recommendations if r.decision == "keep" and (not scopes or r.scope in scopes)]
    if kept:
        return (f"keep what you have for {', '.join(kept)}: no change earned its evidence in session {sid}; "
                "its other changes are for elsewhere, as this file says")
    return f"nothing to change in {what}: the changes of session {sid} are for elsewhere, as this file says"


def restart_note(rec: Recommendation) -> str | None:
    if rec.requires == "restart":
        return f"{rec.knob} takes effect only after a restart (pg_settings.pending_restart shows it until then)"
    return None


def source_note(rec: Recommendation) -> str | None:
    """Why a configuration-file line may not reach today's value: it comes from something that outranks files."""
    if rec.source in ABOVE_FILES:
        return (f"today's {rec.knob} comes from '{rec.source}', which takes precedence over configuration files "
                "where it applies: look there first")
    return None


def file_rollback(rec: Recommendation) -> int | str | None:
    """What a configuration format's rollback twin sets for a server setting: today's value when it came from a
    configuration file; None — no line, the key removed — when it came from the built-in default or from
    something a file does not set (the value comes back from there by itself)."""
    return rec.current if rec.source == "configuration file" else None


def elsewhere(rec: Recommendation, what: str) -> str:
    """The sentence for a change ``what`` cannot express, and where it goes instead."""
    head = f"{label(rec)}: {rec.current} -> {rec.recommended}"
    if rec.scope == "tablespace":
        statement = sql.apply_sql(rec)
        where = (f"run {statement} on the primary (recommendation.sql, or the ansible format)" if statement
                 else f"not written at all: {sql.not_rendered(rec)}")
        return f"{head}: {what} cannot set a tablespace's option; {where}"
    if rec.scope == "device":
        how = ("see the udev, tuned or ansible format" if host_emit.commands(rec) is not None
               else f"not written at all: {host_emit.not_rendered(rec)}")
        return f"{head}: a host setting, not PostgreSQL's; {how}"
    return f"{head}: a PostgreSQL setting, not the host's; see the sql, conf, ansible, patroni, cnpg or zalando format"


@dataclass
class ParameterSet:
    """The server settings of a report as a map of strings (Patroni, CloudNativePG, Zalando), with the comments
    that go with it. ``rollback`` maps a name to today's value, or to None: remove the key."""

    apply: dict[str, str] = field(default_factory=dict)
    rollback: dict[str, str | None] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    rollback_notes: list[str] = field(default_factory=list)
    restart: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)


def parameter_set(report: Report, what: str, *, refuse: Mapping[str, str] | None = None,
                  restart: str | None = None) -> ParameterSet:
    """The report's server-setting changes as strings for ``what``. A name in ``refuse`` (lower case → why) is
    not written and says why; ``restart`` is the sentence for a setting that needs a restart there."""
    refuse = refuse or {}
    out = ParameterSet()
    for rec in changes(report):
        if rec.scope != "system":
            out.notes.append(elsewhere(rec, what))
            continue
        if rec.knob.lower() in refuse:
            out.refused.append(f"{rec.knob}: refused: {refuse[rec.knob.lower()]}")
            continue

        def texts(rec: Recommendation = rec) -> tuple[str, str | None]:
            quote.setting(rec.knob)
            back = file_rollback(rec)
            return quote.setting_text(rec.recommended), None if back is None else quote.setting_text(back)

        pair, why = quote.attempt(texts)
        out.notes.append(evidence(rec, report))
        if pair is None:
            out.notes.append(f"{rec.knob}: not written: {why}")
            out.rollback_notes.append(f"{rec.knob}: not written, so nothing to roll back: {why}")
            continue
        out.evidence.append(evidence(rec, report))
        out.apply[rec.knob], out.rollback[rec.knob] = pair
        if rec.requires == "restart":
            out.restart.append(rec.knob)
            out.notes.append(f"{rec.knob}: {restart or restart_note(rec)}")
        if note := source_note(rec):
            out.notes.append(note)
        came = "the built-in default" if rec.source == "default" else f"'{rec.source}'"
        out.rollback_notes.append(
            f"{rec.knob}: back to {rec.current}, " + ("as a configuration file set it" if pair[1] is not None
                                                      else f"from {came}: the key is removed"))
    out.notes += out.refused
    return out


BY_KERNEL_NAME = ("matched by kernel name: the device has no WWID or serial, and kernel names can change across "
                  "reboots")


def by_kernel_name(rec: Recommendation) -> bool:
    """Whether the device is matched by its kernel name only (it has no WWID, serial or other stable key)."""
    match = rec.device.match if rec.device else {}
    return set(match) == {"KERNEL"} and not match["KERNEL"].endswith("*")


def device_entries(report: Report, out: list[str], *, rollback: bool, what: str, reopen: str,
                   entry: Callable[[Recommendation, int], list[str]]) -> list[str]:
    """``out`` (the file's header, which ends with a blank line) and then the entries: ``entry(rec, n)`` gives the
    lines that set the ``n``-th written device (from 1) to its recommended value, or back to today's with
    ``rollback``; it raises :class:`quote.Unrenderable` for one it cannot write. ``what`` names the file in
    sentences; ``reopen`` says how the value reaches PostgreSQL's open files."""
    top = len(out)
    written = 0
    refused: list[str] = []
    for rec in changes(report):
        if rec.scope != "device":
            if not rollback:
                out += [*quote.comment(elsewhere(rec, what)), ""]
            continue
        lines, why = quote.attempt(partial(entry, rec, written + 1))
        head = (f"{label(rec)}: back to {rec.current} (today's value, from the {rec.source})" if rollback
                else evidence(rec, report))
        out += quote.comment(head)
        if lines is None:
            out += quote.comment(f"not written: {why}")
            refused.append(f"{label(rec)} ({why})")
        else:
            if by_kernel_name(rec):
                out += quote.comment(BY_KERNEL_NAME)
            if not rollback:
                out += quote.comment(reopen)
            out += lines
            written += 1
        out.append("")
    if not written:
        note = ("nothing to roll back." if rollback and not refused else
                f"this file sets nothing: tuner refused to write {'; '.join(refused)}, so today's value is kept"
                if refused else empty(report, what, "device"))
        out[top:top] = [*quote.comment(note), ""]
    return out

