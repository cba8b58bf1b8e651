"""What ``tuner history`` prints: the stored sessions, grouped by target, as plain text for a terminal or JSON for a
program."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tuner.emit import quote

if TYPE_CHECKING:
    from tuner.store import SessionSummary


def _decision(d: dict[str, Any]) -> str:
    knob = f"{d['knob']} ({d['object']})" if d.get("object") else d["knob"]
    if d["decision"] == "change":
        text = f"{knob} {d['current']} -> {d['recommended']}"
    else:
        text = f"{knob} keep {d['current']}"
    if d.get("improvement") is not None and d.get("ci95"):
        lo, hi = d["ci95"]
        text += f" ({d['improvement']:.2f}x, 95% CI [{lo:.2f}, {hi:.2f}])"
    if d.get("near_optimal"):
        text += f", near-optimal {d['near_optimal'][0]}..{d['near_optimal'][1]}"
    return text


def history_text(sessions: list[SessionSummary], where: str, refused: Mapping[str, str] | None = None) -> str:
    """The listing for people, as plain text (:func:`history_lines`)."""
    return "\n".join(line for line, _ in history_lines(sessions, where, refused)) + "\n"


def history_lines(sessions: list[SessionSummary], where: str,
                  refused: Mapping[str, str] | None = None) -> list[tuple[str, str | None]]:
    """The listing for people, each line with what it says for a terminal's colours: "change", "keep", "skipped"
    (a session not shown) or None. A session in ``refused`` (id → the sentence of
    :func:`tuner.report.validate.check`) is listed with that sentence instead of its decisions, as `tuner show`
    would refuse it."""
    refused = refused or {}
    if not sessions:
        return [(f"no sessions stored in {where} yet", None)]
    lines: list[tuple[str, str | None]] = []
    by_target: dict[str, list[SessionSummary]] = {}
    for s in sessions:
        by_target.setdefault(s.target_id, []).append(s)
    for tid, group in by_target.items():
        lines.append((quote.one_line(f"target {tid} · {group[0].target}"), None))
        for i, s in enumerate(group):
            lines.append((quote.one_line(
                f"  {s.id}  {s.started_at}  {s.kind}  PostgreSQL {s.server_version}  policy {s.policy}  "
                f"{s.probes} probes in {s.duration_s:.0f} s"), None))
            if i + 1 < len(group):  # the listing is newest first: the next one is the session before
                changed = _fingerprint_changes(group[i + 1].fingerprint, s.fingerprint)
                if changed:
                    lines.append((quote.one_line("      changed since " + group[i + 1].id + ": " + "; ".join(changed)),
                                  None))
            if s.id in refused:
                lines.append((quote.one_line(f"      not shown: {refused[s.id]}"), "skipped"))
                continue
            for d in s.decisions or []:
                lines.append((quote.one_line(f"      {_decision(d)}"), "change" if d["decision"] == "change" else "keep"))
            if not s.decisions:
                lines.append(("      no recommendation (see 'tuner show " + s.id + "')", None))
    return lines


def _fingerprint_changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What differs between two fingerprints of one target, as short phrases."""
    out = []
    for key, name in (("server_version_num", "PostgreSQL"), ("device_key", "data device"), ("kernel", "kernel")):
        if before.get(key) != after.get(key):
            out.append(f"{name} {before.get(key)} -> {after.get(key)}")
    sa, sb = before.get("settings") or {}, after.get("settings") or {}
    for name in sorted(set(sa) | set(sb)):
        if sa.get(name) != sb.get(name):
            a = f"{sa[name][0]} ({sa[name][1]})" if name in sa else "unknown"
            b = f"{sb[name][0]} ({sb[name][1]})" if name in sb else "unknown"
            out.append(f"{name} {a} -> {b}")
    return out


def history_json(sessions: list[SessionSummary], refused: Mapping[str, str] | None = None) -> str:
    """The listing as JSON; a session in ``refused`` carries ``"refused": sentence`` and no decisions."""
    refused = refused or {}
    out = [s.__dict__ | ({"decisions": [], "refused": refused[s.id]} if s.id in refused else {}) for s in sessions]
    return json.dumps(out, indent=2, ensure_ascii=False) + "\n"
