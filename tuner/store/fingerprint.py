"""A target's fingerprint: what a session ran against, stored with it. Warm starts match on it (the same system
identifier, else the same device model + file system + PostgreSQL major); the daemon's drift check compares it."""

from __future__ import annotations

import platform
import socket
from pathlib import Path
from typing import Any

from tuner.knobs import catalog
from tuner.knobs.devices import place
from tuner.target.facts import TargetFacts


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


def data_device(facts: TargetFacts) -> dict[str, Any] | None:
    """The block device under the data directory, when the target runs on this host."""
    local = facts.local_data_directory()
    if local is None:
        return None
    p = place("data directory", local)
    if p.device is None:
        return {"name": None, "model": None, "rotational": None, "fstype": p.fstype}
    d = p.device
    return {
        "name": d.name,
        "kind": d.kind,
        "model": _read(d.sys_dir / "device" / "model"),
        "vendor": _read(d.sys_dir / "device" / "vendor"),
        "rotational": _read(d.sys_dir / "queue" / "rotational"),
        "fstype": p.fstype,
    }


def fingerprint(facts: TargetFacts, *, label: str) -> dict[str, Any]:
    device = data_device(facts)
    device_key = None
    if device is not None and device.get("fstype"):
        # The model when the device reports one; else its kind (loop, dm, md …): devices of one kind and file
        # system behave alike more often than not, and a re-measured baseline calibrates the rest.
        what = device.get("model") or device.get("kind") or "unknown"
        device_key = f"{what}|rotational={device.get('rotational')}|{device['fstype']}"
    cat = catalog.load()
    # [value, source] and, where the role may see it, the file that sets it (a conf.d export says whether
    # postgresql.auto.conf would override it).
    settings = {name: [s.setting, s.source] + ([f"{s.sourcefile}:{s.sourceline}"] if s.sourcefile else [])
                for name, s in sorted(facts.settings.items()) if cat.knows(name)}
    return {
        "label": label,
        "system_identifier": facts.system_identifier,
        "data_directory": facts.data_directory,
        "server_version_num": facts.server_version_num,
        "major": facts.major,
        "host": socket.gethostname(),
        "kernel": platform.release(),
        "data_device": device,
        "device_key": device_key,
        "settings": settings,
    }
