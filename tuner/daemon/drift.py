"""The drift check: what changed between two drift fingerprints of a target, and what a change calls for.

:func:`tuner.target.fingerprint.observe` reads the fingerprint (in one module with a session's), :func:`compare` lists the :class:`Change` objects, :func:`action` turns them
into one :class:`Action` and :func:`changes_json` into what ``Store.record_drift`` stores and ``GET /v1/drift``
serves. A recommendation is named by :func:`recommendation_key`: the knob for the server (``effective_io_concurrency``),
``knob:object`` otherwise (``read_ahead_kb:/dev/loop3``, ``effective_io_concurrency:fast`` for a tablespace) —
``Recommendation.knob`` and ``.object`` as stored.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from tuner.daemon import workload_shift
from tuner.families import REGISTRY
from tuner.knobs import catalog
from tuner.target.fingerprint import recommendation_key

_SERVER_FIELDS = ("major", "server_version_num", "system_identifier", "timeline", "postmaster_start", "in_recovery")

# Why a change re-probes: every family (each moves what every measurement stood on); for the workload, only the
# families that read it (Family.reads_workload).
_WHY = {"kernel": "a new kernel release changes the block layer and page cache under every measurement",
        "cgroup": "a new cgroup limit changes the memory or I/O every measurement had",
        "device": "a device's I/O scheduler or rotational flag changes how it queues every request",
        "size": "less of the data fits in memory than when it was measured",
        "workload": "the statements that read the most are not the ones the recommendations were measured on"}

ChangeKind = Literal["server", "setting", "device", "kernel", "cgroup", "size", "workload"]


def knob_families() -> dict[str, str]:
    """Each catalogued knob's family (the catalogue is the one place that says it), for the registered families."""
    cat = catalog.load()
    return {k: family for family in REGISTRY.names() for k in cat.names(family)}


def server_values(fp: Mapping[str, Any]) -> dict[tuple[str, str | None], Any]:
    """What a fingerprint says the server runs with now, per (knob, object) as recommendations name them: the
    catalogued settings (object None, or a tablespace's name) and each device's ``read_ahead_kb`` (its node)."""
    out: dict[tuple[str, str | None], Any] = {}
    for key, s in (fp.get("settings") or {}).items():
        knob, _, obj = key.partition(":")
        out[(knob, obj or None)] = s.get("value") if isinstance(s, Mapping) else None
    for d in (fp.get("devices") or {}).values():
        if isinstance(d, Mapping) and d.get("node") and d.get("read_ahead_kb") is not None:
            out[("read_ahead_kb", str(d["node"]))] = d["read_ahead_kb"]
    return out


def _version(num: Any) -> str:
    return f"{num // 10000}.{num % 100}" if isinstance(num, int) and num >= 100000 else str(num)


def _shown(s: dict[str, Any] | None, tablespace: bool) -> str:
    if s is None:
        return "the server's value" if tablespace else "nothing (not a setting of that server)"
    unit = s.get("unit")
    value = f"{s['value']} x {unit}" if unit and unit[0].isdigit() else f"{s['value']} {unit}" if unit else s["value"]
    if s.get("sourcefile"):
        where = os.path.basename(s["sourcefile"]) + (f":{s['sourceline']}" if s.get("sourceline") else "")
    else:
        where = "ALTER TABLESPACE" if str(s.get("source", "")).startswith("tablespace ") else s.get("source")
    return f"{value} ({where})"


@dataclass(frozen=True)
class Change:
    """One difference between two fingerprints. ``before``/``after`` are the fingerprint's values (None: absent)."""

    key: str  # "server:major", "setting:effective_io_concurrency", "device:loop3:read_ahead_kb", "size:band" …
    kind: ChangeKind
    before: Any
    after: Any

    @property
    def recommendation(self) -> str | None:
        """The :func:`recommendation_key` of the knob this change moved, if it moved one."""
        parts = self.key.split(":", 2)
        if self.kind == "setting":
            return self.key.split(":", 1)[1]
        if self.kind == "device" and parts[2:] == ["read_ahead_kb"]:
            return recommendation_key("read_ahead_kb", f"/dev/{parts[1]}")
        return None

    @property
    def value_changed(self) -> bool:
        """For a setting: its value changed, not just where it is set."""
        return self.kind != "setting" or (self.before or {}).get("value") != (self.after or {}).get("value")

    def sentence(self) -> str:
        """One clause, lower case, no full stop: "read_ahead_kb of /dev/loop3 changed from 128 to 4096"."""
        b, a, parts = self.before, self.after, self.key.split(":", 2)
        if self.kind == "setting":
            ts = len(parts) > 2
            name = parts[1] + (f" of tablespace {parts[2]}" if ts else "")
            return f"{name} changed from {_shown(b, ts)} to {_shown(a, ts)}"
        if self.kind == "device":
            node = f"/dev/{parts[1]}"
            if len(parts) == 2 and b is None:
                ids = ", ".join(f"{k} {a[k]}" for k in ("model", "serial") if a.get(k))
                return f"{node} appeared under {', '.join(a['roles'])}" + (f" ({ids})" if ids else "")
            if len(parts) == 2:
                return f"{node} no longer holds {', '.join(b['roles'])}"
            return f"{parts[2]} of {node} changed from {b} to {a}"
        if self.key == "server:postmaster_start":
            return f"PostgreSQL restarted (its postmaster started at {a}, before at {b})"
        if self.key == "server:in_recovery":
            return "the server was promoted" if b else "the server became a standby"
        if self.key == "server:server_version_num":
            return f"PostgreSQL was updated from {_version(b)} to {_version(a)}"
        if self.kind == "workload":
            return workload_shift.shift(self.before, self.after).sentence()
        if self.kind == "size":
            gib = 1 << 30
            return (f"the databases' size moved from '{b['label']}' ({b['database_bytes'] / gib:.1f} GiB) to "
                    f"'{a['label']}' ({a['database_bytes'] / gib:.1f} GiB; {a['memory_basis']} "
                    f"{a['memory_bytes'] / gib:.1f} GiB)")
        what = {"server:major": "the PostgreSQL major version", "server:system_identifier": "the system identifier",
                "server:timeline": "the timeline", "kernel:release": "the kernel release"}.get(self.key)
        if self.kind == "cgroup":
            what = f"PostgreSQL's cgroup {parts[1]}"
        return f"{what or self.key} changed from {b} to {a}"


def _entries(fp: Mapping[str, Any], with_devices: bool) -> dict[str, tuple[ChangeKind, Any, Any, bool]]:
    """key -> (kind, what is compared, what is shown, whether appearing or disappearing is a change). Unknown values
    (None: unreadable) of the server, kernel, cgroup and size are left out: unreadable is not changed."""
    out: dict[str, tuple[ChangeKind, Any, Any, bool]] = {}
    for name in _SERVER_FIELDS:
        if (fp.get("server") or {}).get(name) is not None:
            out[f"server:{name}"] = ("server", fp["server"][name], fp["server"][name], False)
    for name, s in (fp.get("settings") or {}).items():  # a line moved within its file is not a change
        out[f"setting:{name}"] = ("setting", (s["value"], s["source"], s["sourcefile"]), s, True)
    for name, d in (fp.get("devices") or {}).items() if with_devices else ():
        out[f"device:{name}"] = ("device", True, d, True)
        for attr in ("model", "serial", "rotational", "scheduler", "read_ahead_kb", "roles"):
            out[f"device:{name}:{attr}"] = ("device", d[attr], d[attr], False)
    if fp.get("kernel"):
        out["kernel:release"] = ("kernel", fp["kernel"], fp["kernel"], False)
    for name, value in (fp.get("cgroup") or {}).items():
        if value is not None:
            out[f"cgroup:{name}"] = ("cgroup", value, value, False)
    if fp.get("size"):
        out["size:band"] = ("size", fp["size"]["band"], fp["size"], False)
    return out


def compare(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[Change]:
    """What changed from ``before`` to ``after`` (two :func:`observe` results), in key order; ``observed_at`` and
    the databases' exact size are not compared, only their band, and the top statements only when both have them
    and their shares moved past :data:`tuner.daemon.workload_shift.SHIFT_THRESHOLD` (one change, last)."""
    with_devices = before.get("devices") is not None and after.get("devices") is not None
    b, a = _entries(before, with_devices), _entries(after, with_devices)
    changes = []
    for key in sorted(b.keys() | a.keys()):
        eb, ea = b.get(key), a.get(key)
        kind, _, _, presence = eb or ea  # type: ignore[misc]  # one of them is there
        if (eb[1] != ea[1]) if eb and ea else presence:
            changes.append(Change(key, kind, eb[2] if eb else None, ea[2] if ea else None))
    tops = workload_shift.top(before), workload_shift.top(after)
    if tops[0] is not None and tops[1] is not None and workload_shift.shift(tops[0], tops[1]).drifted:
        changes.append(Change("workload:top", "workload", tops[0], tops[1]))
    if any(c.key == "server:major" for c in changes):  # the major says it; "updated from 15.8 to 16.4" repeats it
        changes = [c for c in changes if c.key != "server:server_version_num"]
    return changes


@dataclass(frozen=True)
class Action:
    """What a drift calls for. ``families``: for a session or a re-probe, which families (empty: all). ``knobs``:
    recommendation keys to re-validate (a short paired confirmation of the accepted recommendation against the
    drifted value) — with a re-probe, those outside the re-probed families (a re-probe re-confirms its own)."""

    kind: Literal["session", "revalidate", "reprobe", "record"]
    families: tuple[str, ...]
    knobs: tuple[str, ...]
    reason: str


def action(changes: list[Change], recommended: Mapping[str, Any]) -> Action:
    """The one action ``changes`` call for, given the accepted recommendations (``recommendation_key`` -> value).
    The strongest wins: a session, then a re-probe of every family, then re-validations and re-probes of some;
    the reason names every change."""
    session, whys, families, knobs, read_path = False, [], set(), {}, False
    for c in changes:
        attr = c.key.split(":")[2] if c.kind == "device" and c.key.count(":") == 2 else None  # None: the device
        if c.key in ("server:major", "server:system_identifier") or (
                c.kind == "device" and (attr in ("model", "serial") or (attr is None and c.before is None))):
            session = True
        elif (c.kind in ("kernel", "cgroup") and c.key != "cgroup:path" or attr in ("scheduler", "rotational")
              or c.kind == "size" and c.after["band"] > c.before["band"]):
            whys.append(_WHY[c.kind])
        elif c.kind == "workload":
            read_path = True
        elif c.recommendation and c.value_changed:
            key = c.recommendation
            value = (c.after or {}).get("value") if c.kind == "setting" else c.after
            family = knob_families().get(attr or "", "") if c.kind == "device" else (c.after or c.before)["family"]
            if key not in recommended:
                families.add(family)
            elif str(value) != str(recommended[key]):  # moved to the recommendation: applied, nothing to check
                knobs[key] = family
    said = "; ".join(c.sentence() for c in changes) or "nothing changed"
    if session:
        return Action("session", (), (), f"A full session, as the server, the cluster or a device is new: {said}."
                      + "".join(f" {why}" for c in changes if c.key == "server:major" for why in _upgrade(c)))
    if whys:
        whys += [_WHY["workload"]] if read_path else []
        return Action("reprobe", (), (), f"Re-probe every family, as {' and '.join(dict.fromkeys(whys))}: {said}.")
    if read_path:  # only the families that read the workload: the WAL and replay families run loads of their own
        families |= {name for name in REGISTRY.names() if REGISTRY.get(name).reads_workload}
    rest = tuple(k for k, f in knobs.items() if f not in families)  # a re-probe re-confirms its own knobs
    if families:
        also = f" and re-validate {', '.join(rest)}" if rest else ""
        why = f", as {_WHY['workload']}" if read_path else " (no accepted recommendation to re-validate)"
        return Action("reprobe", tuple(sorted(families)), rest,
                      f"Re-probe {', '.join(sorted(families))}{why}{also}: {said}.")
    if rest:
        return Action("revalidate", (), rest, f"Re-validate {', '.join(rest)} against the accepted recommendation: "
                                             f"{said}.")
    return Action("record", (), (), f"Recorded; nothing to measure again: {said}.")


# What a major version changed in the I/O that tuner measures: why a tuning done before it must be measured again
# (PostgreSQL 17, 18 and 19 release notes; commit d1c01b7 for 19's pool, f63ca3379025 / 6e36930f9aaf /
# 8ca147d582a5 for 19's read-stream look-ahead).
_MAJOR_IO = {
    17: "17 reads sequential scans through read streams that combine reads up to io_combine_limit",
    18: "18 reads asynchronously (io_method, io_workers), and effective_io_concurrency also sets the look-ahead of "
        "sequential scans, its default now 16",
    19: "19 removed io_workers for a pool that sizes itself (io_min_workers, io_max_workers), and its read streams "
        "grow their look-ahead only when a read waited, so effective_io_concurrency tuned before needs measuring "
        "again",
}


def _upgrade(change: Change) -> list[str]:
    """Why a new major needs its I/O measured again: what each major crossed changed (nothing for a downgrade)."""
    try:
        before, after = int(change.before), int(change.after)
    except (TypeError, ValueError):
        return []
    crossed = [_MAJOR_IO[m] for m in sorted(_MAJOR_IO) if before < m <= after]
    return [f"Since PostgreSQL {before}: {'; '.join(crossed)}."] if crossed else []


def changes_json(changes: list[Change]) -> dict[str, dict[str, Any]]:
    """``{key: {"kind", "from", "to", "sentence"}}``: what ``Store.record_drift`` stores and ``GET /v1/drift``
    serves (fingerprint values only: nothing from the DSN)."""
    return {c.key: {"kind": c.kind, "from": c.before, "to": c.after, "sentence": c.sentence()} for c in changes}
