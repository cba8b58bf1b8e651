"""``tuned/tuned.conf``: the readahead changes as a tuned profile (its ``disk`` plugin), and its rollback twin.

tuned's disk plugin writes ``readahead=`` to the device's queue/read_ahead_kb: the number is in KiB (a suffix
`` s`` would mean 512-byte sectors; tuned 2.20, plugins/plugin_disk.py ``_parse_ra``). Devices are matched by
``devices=`` (kernel names, fnmatch) or ``devices_udev_regex=`` (a regex searched in the device's udev properties,
one ``KEY=value`` line each; hardware/device_matcher_udev.py). Kernel names can change across reboots, so a device
with a stable identity is matched by the udev property that carries it:

- a device-mapper UUID or name (tuner's ``ENV{DM_UUID}``/``ENV{DM_NAME}``) is that property itself (55-dm.rules);
- an NVMe namespace's ``wwid`` is ``ID_WWN`` and a virtio disk's ``serial`` is ``ID_SERIAL``
  (systemd's 60-persistent-storage.rules: ``ENV{ID_WWN}="$attr{wwid}"``, ``ENV{ID_SERIAL}="$attr{serial}"``).

A SCSI WWID (device/wwid) has no udev property of the same text, and a loop device's backing file none at all:
such a device is not written here — the udev format matches it exactly. Only a device with no stable identity is
matched by its kernel name. Values are checked by :func:`tuner.emit.quote.plain` (tuned expands ``${...}`` in
values, and ``${f:exec:...}`` runs a command).
"""

from __future__ import annotations

from functools import partial
from typing import ClassVar

from tuner.emit import changes as ch
from tuner.emit import host as host_emit
from tuner.emit import quote
from tuner.emit.changes import device_entries
from tuner.emit.twin import ROLLBACK_DIR, ApplyRollback, file_text
from tuner.report.model import DeviceRef, Recommendation, Report

FILE = "tuned/tuned.conf"
ROLLBACK_FILE = ROLLBACK_DIR + FILE
PROFILE = "tuner-readahead"
# The profiles active now, as tuned-adm prints them ("No current active profile." prints nothing here).
ACTIVE = "$(tuned-adm active | sed -n 's/^Current active profile: //p')"
PRIORITY = -10  # instances are given devices in priority order (default 0): before a [disk] that takes every disk
WHAT = "a tuned profile"
REOPEN = "PostgreSQL's open files keep their old readahead: restart PostgreSQL to reach every backend"


def device_match(device: DeviceRef) -> str:
    """The ``devices=`` or ``devices_udev_regex=`` line that names ``device``. Raises quote.Unrenderable."""
    m = device.match
    for key, prop in (("ENV{DM_UUID}", "DM_UUID"), ("ENV{DM_NAME}", "DM_NAME")):
        if key in m:
            return f"devices_udev_regex={quote.tuned_match(prop, m[key])}"
    if "ATTR{wwid}" in m and device.name.startswith("nvme"):
        return f"devices_udev_regex={quote.tuned_match('ID_WWN', m['ATTR{wwid}'])}"
    if "ATTR{serial}" in m and device.name.startswith("vd"):
        return f"devices_udev_regex={quote.tuned_match('ID_SERIAL', m['ATTR{serial}'])}"
    if set(m) == {"KERNEL"} and not m["KERNEL"].endswith("*"):
        return f"devices={quote.plain(m['KERNEL'], 'the kernel name')}"
    raise quote.Unrenderable(
        f"tuned matches a device only by a udev property or its kernel name, and {quote.shown(device.node)} is "
        f"identified by {' and '.join(sorted(m))}, which no udev property carries: use the udev format")


def _section(rec: Recommendation, index: int, *, rollback: bool) -> list[str]:
    if host_emit.commands(rec) is None or rec.device is None:
        raise quote.Unrenderable(host_emit.not_rendered(rec) or f"no device for {rec.object}")
    kb = quote.integer(rec.current if rollback else rec.recommended, "read_ahead_kb")
    return [f"[tuner_disk_{index}]", "type=disk", f"priority={PRIORITY}", device_match(rec.device),
            f"readahead={kb}"]


def render(report: Report, *, rollback: bool = False) -> str:
    """The profile. It names no other profile: tuned applies several at once, merged in the order given, the last
    one winning a conflict (``tuned-adm profile A B``; Red Hat, "Merged TuneD profiles"), so the install line
    adds this one after the profiles active now instead of an ``include=`` that would have to name them."""
    lines = [f"tuned.conf: {ch.provenance(report)}", ch.measured_on(report),
             "readahead= is in KiB, as in queue/read_ahead_kb."]
    install = (f"mkdir -p /etc/tuned/{PROFILE} && cp tuned.conf /etc/tuned/{PROFILE}/tuned.conf && "
               f"tuned-adm profile {ACTIVE} {PROFILE}")
    if rollback:
        lines.append(f"Rollback of session {report.session.id}: switch back to the profiles you had (those "
                     f"tuned-adm active lists before {PROFILE}: tuned-adm profile NAME ...): tuned puts back the readahead it found. Or, while {PROFILE} is active, "
                     f"copy this file over /etc/tuned/{PROFILE}/tuned.conf and run tuned-adm profile with the same "
                     "profiles again.")
    else:
        lines += [f"Install, as root: {install}. tuned keeps the profiles active now and applies this one after "
                  "them (the last one wins where they disagree). Or copy the [tuner_disk_*] sections into your "
                  "own profile.",
                  "Rollback: tuned-adm profile with the profiles you had (tuned-adm active shows them, after "
                  f"{PROFILE}); or rollback/tuned/tuned.conf in this file's place."]
    out = [c for line in lines for c in quote.comment(line)]
    out += ["", "[main]", "summary=readahead measured by tuner", ""]
    return file_text(device_entries(report, out, rollback=rollback, what=WHAT, reopen=REOPEN,
                                    entry=partial(_section, rollback=rollback)))


class Tuned(ApplyRollback):
    """A tuned profile with the readahead changes, and its rollback twin."""

    name: ClassVar[str] = "tuned"
    parts = ((FILE, render),)
