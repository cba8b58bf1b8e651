"""What ``tuner diff`` says: what changed between two stored sessions' reports — the target, the settings in force,
each knob's decision — as a dict (its JSON) and as plain text."""

from __future__ import annotations

from typing import Any

from tuner.emit import quote
from tuner.knobs import catalog, successors
from tuner.report.model import Recommendation, Report


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

