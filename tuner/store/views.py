"""What ``tuner history`` and ``tuner diff`` print: plain text for a terminal, JSON for a program."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tuner.emit import quote
from tuner.knobs import catalog, successors
from tuner.report.model import Recommendation, Report
from tuner.store.base import SessionSummary, target_id


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
                changed = changes(group[i + 1].fingerprint, s.fingerprint)
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


def changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
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


def _key(r: Recommendation) -> tuple[str, str | None]:
    return (r.knob, r.object)


_EIC = "effective_io_concurrency"


def _eic_in_13_terms(report: Report) -> Report:
    """``report`` with its effective_io_concurrency values (recommendations and the setting in force) in the 13+
    meaning: a prefetch distance, converted from a pre-13 spindle count as PostgreSQL 13 did (release notes of 13)."""
    def conv(v: Any) -> Any:
        return catalog.eic_pre13_to_13(v) if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else v

    recs = [r.model_copy(update={"current": conv(r.current), "recommended": conv(r.recommended),
                                 "near_optimal": None if r.near_optimal is None
                                 else (conv(r.near_optimal[0]), conv(r.near_optimal[1]))})
            if r.knob == _EIC else r for r in report.recommendations]
    fp = dict(report.target.fingerprint or {})
    settings = dict(fp.get("settings") or {})
    if _EIC in settings and str(settings[_EIC][0]).isdigit():
        settings[_EIC] = [str(conv(int(settings[_EIC][0]))), *settings[_EIC][1:]]
        fp["settings"] = settings
    return report.model_copy(update={"recommendations": recs,
                                     "target": report.target.model_copy(update={"fingerprint": fp})})


def diff(a: Report, b: Report) -> dict[str, Any]:
    """What changed from session ``a`` to session ``b``: the target, the settings in force, the decisions.

    When one session ran on a server before 13 and the other on 13+, the older one's effective_io_concurrency
    (a number of spindles) is compared in the newer meaning (a prefetch distance), converted as PostgreSQL did,
    and ``converted`` says so."""
    converted = None
    old, new = a.target.server_version_num < 130000, b.target.server_version_num < 130000
    if old != new:
        pre13 = a if old else b
        converted = (f"effective_io_concurrency of session {pre13.session.id} (PostgreSQL "
                     f"{pre13.target.server_version}: a number of spindles) is shown as PostgreSQL 13+ reads it "
                     "(a prefetch distance: round(sum of old/n for n = 1..old), at most 1000)")
        a, b = (_eic_in_13_terms(a), b) if old else (a, _eic_in_13_terms(b))
    converted = "; ".join(n for n in (converted, successors.upgrade_note(a, b)) if n) or None  # 18 -> 19
    fa, fb = a.target.fingerprint or {}, b.target.fingerprint or {}
    target: list[dict[str, Any]] = []
    for key in ("system_identifier", "server_version_num", "data_directory", "device_key", "kernel", "host"):
        if fa.get(key) != fb.get(key):
            target.append({"what": key, "before": fa.get(key), "after": fb.get(key)})
    settings: list[dict[str, Any]] = []
    sa, sb = fa.get("settings") or {}, fb.get("settings") or {}
    for name in sorted(set(sa) | set(sb)):
        if sa.get(name) != sb.get(name):
            settings.append({"setting": name, "before": sa.get(name), "after": sb.get(name)})
    ra, rb = {_key(r): r for r in a.recommendations}, {_key(r): r for r in b.recommendations}
    decisions: list[dict[str, Any]] = []
    for k in sorted(set(ra) | set(rb), key=lambda k: (k[0], k[1] or "")):
        x, y = ra.get(k), rb.get(k)
        entry: dict[str, Any] = {"knob": k[0], "object": k[1]}
        for side, r in (("before", x), ("after", y)):
            entry[side] = None if r is None else {
                "decision": r.decision, "current": r.current, "recommended": r.recommended,
                "improvement": r.effect.improvement if r.effect else None,
                "ci95": list(r.effect.ci95) if r.effect else None,
                "near_optimal": list(r.near_optimal) if r.near_optimal else None,
            }
        if x is None or y is None:
            entry["change"] = "only in " + ("the second" if x is None else "the first") + " session"
        elif x.decision != y.decision:
            entry["change"] = f"decision changed ({x.decision} -> {y.decision})"
        elif x.recommended != y.recommended:
            inside = (x.near_optimal is not None and isinstance(y.recommended, int)
                      and x.near_optimal[0] <= y.recommended <= x.near_optimal[1])
            entry["change"] = ("recommended value moved within the first session's near-optimal range" if inside
                               else "recommended value moved outside the first session's near-optimal range")
        else:
            entry["change"] = None
        decisions.append(entry)
    return {
        "sessions": [a.session.id, b.session.id],
        "started_at": [a.session.started_at.isoformat(), b.session.started_at.isoformat()],
        "same_target": bool(fa.get("system_identifier")) and fa.get("system_identifier") == fb.get("system_identifier")
        and fa.get("data_directory") == fb.get("data_directory"),
        "target": target,
        "settings": settings,
        "decisions": decisions,
        "probes": [a.session.probes, b.session.probes],
        "converted": converted,
    }


def _side(s: dict[str, Any] | None) -> str:
    if s is None:
        return "(not tuned)"
    text = (f"{s['current']} -> {s['recommended']}" if s["decision"] == "change" else f"keep {s['current']}")
    if s.get("improvement") is not None and s.get("ci95"):
        text += f" ({s['improvement']:.2f}x [{s['ci95'][0]:.2f}, {s['ci95'][1]:.2f}])"
    return text


def diff_text(d: dict[str, Any]) -> str:
    a, b = d["sessions"]
    lines = [f"{a} ({d['started_at'][0]}) -> {b} ({d['started_at'][1]})"
             + ("" if d["same_target"] else "  [different targets]")]
    if d.get("converted"):
        lines.append(f"  note: {d['converted']}")
    for t in d["target"]:
        lines.append(f"  target {t['what']}: {t['before']} -> {t['after']}")
    for s in d["settings"]:
        before = f"{s['before'][0]} ({s['before'][1]})" if s["before"] else "unset"
        after = f"{s['after'][0]} ({s['after'][1]})" if s["after"] else "unset"
        lines.append(f"  setting {s['setting']}: {before} -> {after}")
    for e in d["decisions"]:
        knob = f"{e['knob']} ({e['object']})" if e["object"] else e["knob"]
        mark = f"  [{e['change']}]" if e["change"] else "  [same decision]"
        lines.append(f"  {knob}: {_side(e['before'])}  |  {_side(e['after'])}{mark}")
    if not d["target"] and not d["settings"] and all(e["change"] is None for e in d["decisions"]):
        lines.append("  nothing changed: same target facts, same settings, same decisions")
    lines.append(f"  probes: {d['probes'][0]} -> {d['probes'][1]}")
    return "\n".join(quote.one_line(line) for line in lines) + "\n"

