"""Readahead as host commands: ``blockdev --setra`` (512-byte sectors), the sysfs form (KiB), and a udev rule that
persists the value — each with its rollback twin. Both commands set the same field, the disk's readahead: sysfs's
``queue/read_ahead_kb`` is in KiB (Linux, Documentation/ABI/stable/sysfs-block), ``blockdev --setra`` goes through
the BLKRASET ioctl in 512-byte sectors (blockdev(8); block/ioctl.c). A value set by hand is gone after a reboot,
so persisting it takes a udev rule that writes ``ATTR{queue/read_ahead_kb}`` when the device appears (udev(7)).
"""

from __future__ import annotations

import shlex
from typing import ClassVar

from tuner.emit import quote
from tuner.report.model import DeviceRef, HostCommands, Recommendation, Report

UDEV_RULE_FILE = "/etc/udev/rules.d/99-tuner-readahead.rules"


def udev_reload(devices: list[DeviceRef]) -> str:
    """The command that loads the rules and applies them to ``devices`` only: a bare ``udevadm trigger`` replays
    "change" on every device of the host, and other rules act on those events too (udevadm(8): --sysname-match,
    given more than once, matches any of the names). Raises quote.Unrenderable for a name that is not plain."""
    names = sorted({quote.sysname(d.name) for d in devices})
    if not names:  # a trigger without a match would reach every block device
        return "udevadm control --reload-rules"
    matches = " ".join(f"--sysname-match={shlex.quote(n)}" for n in names)
    return f"udevadm control --reload-rules && udevadm trigger --action=change --subsystem-match=block {matches}"


def udev_rule(device: DeviceRef, read_ahead_kb: int) -> str:
    """One rule line that matches ``device`` by its most stable attribute and sets its readahead. Raises
    :class:`quote.Unrenderable` when a value cannot be matched exactly, or when nothing identifies the device
    (a rule without a match key would set the readahead of every block device)."""
    if not device.match:
        raise quote.Unrenderable(f"no udev key identifies {quote.shown(device.node)}")
    keys = ['ACTION=="add|change"', 'SUBSYSTEM=="block"']
    keys += [quote.udev_value(k, v) for k, v in device.match.items()]
    keys.append(f'ATTR{{queue/read_ahead_kb}}="{int(read_ahead_kb)}"')
    return ", ".join(keys)


def _commands(rec: Recommendation) -> HostCommands | None:
    device = rec.device
    if device is None or rec.decision != "change":
        return None
    recommended_kb = quote.integer(rec.recommended, "the recommended read_ahead_kb")
    current_kb = quote.integer(rec.current, "today's read_ahead_kb")
    if min(recommended_kb, current_kb) < 0:
        raise quote.Unrenderable(f"a negative read_ahead_kb ({current_kb} -> {recommended_kb})")
    node, sysfs = quote.device_node(device.node), quote.sysfs_path(device.sysfs_path)
    quote.sysname(device.name)  # the udev trigger names it
    return HostCommands(
        apply_blockdev=f"blockdev --setra {2 * recommended_kb} {node}",
        apply_sysfs=f"echo {recommended_kb} > {sysfs}",
        rollback_blockdev=f"blockdev --setra {2 * current_kb} {node}",
        rollback_sysfs=f"echo {current_kb} > {sysfs}",
        udev_rule=udev_rule(device, recommended_kb),
        udev_rule_file=UDEV_RULE_FILE,
    )


def commands(rec: Recommendation) -> HostCommands | None:
    """How to apply a device's readahead change on the host, persist it, and take it back (None: no change, or
    a device that cannot be named safely — see :func:`not_rendered`). The device node and sysfs path are
    checked and shell-quoted, the udev values escaped by :mod:`tuner.emit.quote`."""
    return quote.attempt(lambda: _commands(rec))[0]


def not_rendered(rec: Recommendation) -> str | None:
    """Why a device's change has no host commands, or None."""
    return quote.attempt(lambda: _commands(rec))[1]


def _device_changes(report: Report) -> list[tuple[Recommendation, HostCommands]]:
    return [(r, h) for r in report.recommendations if (h := commands(r)) is not None]


def _devices(changes: list[tuple[Recommendation, HostCommands]]) -> list[DeviceRef]:
    return [r.device for r, _ in changes if r.device is not None]


def _comments(report: Report, *lines: str) -> list[str]:
    """``#`` comment lines (sh and udev alike) of outside text, one line each; then a comment for every
    device change that is not written, and why."""
    refused = [f"{r.object}: not written: {why}" for r in report.recommendations if (why := not_rendered(r))]
    return [c for line in (*lines, *refused) for c in quote.comment(line)]


def render_rules(report: Report) -> str:
    """The udev rules file for every device whose readahead tuner recommends changing."""
    s = report.session
    changes = _device_changes(report)
    out = _comments(
        report,
        f"tuner readahead rules — session {s.id}, {s.started_at:%Y-%m-%d %H:%M:%S} UTC, host {s.host}, kernel {s.kernel}",
        f"Install as {UDEV_RULE_FILE}, then: {udev_reload(_devices(changes))}",
        "Rollback: remove this file and run the rollback commands in readahead-rollback.sh.",
    )
    for r, host in changes:
        out += quote.comment(f"{r.object}: read_ahead_kb {r.current} -> {r.recommended}{_evidence(r)}")
        if 'KERNEL=="' in host.udev_rule and "loop*" not in host.udev_rule:
            out.append("# (matched by kernel name: it has no WWID or serial; kernel names can change across reboots)")
        out.append(host.udev_rule)
    if not changes:
        out.append("# nothing to change.")
    return "\n".join(out) + "\n"


def _evidence(r: Recommendation) -> str:
    if r.effect is None:
        return ""
    e = r.effect
    return f", measured {e.improvement:.2f}x faster, 95% CI [{e.ci95[0]:.2f}, {e.ci95[1]:.2f}], n = {e.n_pairs} pairs"


def render_script(report: Report, *, rollback: bool = False) -> str:
    """A shell script that applies (or rolls back) the readahead changes now and installs (or removes) the rule.
    Its commands are tuner's own with checked, shell-quoted device paths; outside text is only in comments."""
    changes = _device_changes(report)
    what = "rollback" if rollback else "apply"
    out = ["#!/bin/sh", *_comments(report, f"tuner readahead {what} — session {report.session.id}; "
                                           f"run as root on {report.session.host}"), "set -e"]
    for r, host in changes:
        out += quote.comment(
            f"{r.object}: read_ahead_kb {r.recommended if rollback else r.current} -> "
            f"{r.current if rollback else r.recommended}{'' if rollback else _evidence(r)}")
        out.append(host.rollback_blockdev if rollback else host.apply_blockdev)
        out.append(f"# or: {host.rollback_sysfs if rollback else host.apply_sysfs}")
    if changes:
        if rollback:
            out.append(f"rm -f {UDEV_RULE_FILE}")
        else:
            out.append(f"# persist: install 99-tuner-readahead.rules as {UDEV_RULE_FILE}")
        out.append(udev_reload(_devices(changes)))
        out += quote.comment("Files PostgreSQL already has open keep their old readahead: restart it to reach "
                             "every backend.")
    else:
        out.append("# nothing to change.")
    return "\n".join(out) + "\n"


class Host:
    """Readahead for the host: an apply script, its rollback and a udev rules file — only when a device's
    readahead should change."""

    name: ClassVar[str] = "host"
    stdout: ClassVar[bool] = False

    def render(self, report: Report) -> dict[str, str]:
        if not _device_changes(report):
            return {}
        return {
            "readahead.sh": render_script(report),
            "readahead-rollback.sh": render_script(report, rollback=True),
            "99-tuner-readahead.rules": render_rules(report),
        }
