"""Readahead as host commands: ``blockdev --setra`` (512-byte sectors), the sysfs form (KiB), and a udev rule that
persists the value — each with its rollback twin. Facts: reference/pg-io-facts.md §5.1, §5.4.
"""

from __future__ import annotations

from typing import ClassVar

from tuner.model import DeviceRef, HostCommands, Recommendation, Report

UDEV_RULE_FILE = "/etc/udev/rules.d/99-tuner-readahead.rules"
UDEV_RELOAD = "udevadm control --reload-rules && udevadm trigger --type=devices --action=change"


def _udev_quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def udev_rule(device: DeviceRef, read_ahead_kb: int) -> str:
    """One rule line that matches ``device`` by its most stable attribute and sets its readahead."""
    keys = ['ACTION=="add|change"', 'SUBSYSTEM=="block"']
    keys += [f'{k}=="{_udev_quote(v)}"' for k, v in device.match.items()]
    keys.append(f'ATTR{{queue/read_ahead_kb}}="{int(read_ahead_kb)}"')
    return ", ".join(keys)


def commands(rec: Recommendation) -> HostCommands | None:
    """How to apply a device's readahead change on the host, persist it, and take it back (None: no change)."""
    device = rec.device
    if device is None or rec.decision != "change":
        return None
    recommended_kb, current_kb = int(rec.recommended), int(rec.current)
    return HostCommands(
        apply_blockdev=f"blockdev --setra {2 * recommended_kb} {device.node}",
        apply_sysfs=f"echo {recommended_kb} > {device.sysfs_path}",
        rollback_blockdev=f"blockdev --setra {2 * current_kb} {device.node}",
        rollback_sysfs=f"echo {current_kb} > {device.sysfs_path}",
        udev_rule=udev_rule(device, recommended_kb),
        udev_rule_file=UDEV_RULE_FILE,
    )


def _device_changes(report: Report) -> list[tuple[Recommendation, HostCommands]]:
    return [(r, h) for r in report.recommendations if (h := commands(r)) is not None]


def render_rules(report: Report) -> str:
    """The udev rules file for every device whose readahead tuner recommends changing."""
    s = report.session
    out = [
        f"# tuner readahead rules — session {s.id}, {s.started_at:%Y-%m-%d %H:%M:%S} UTC, host {s.host}, kernel {s.kernel}",
        f"# Install as {UDEV_RULE_FILE}, then: {UDEV_RELOAD}",
        "# Rollback: remove this file and run the rollback commands in readahead-rollback.sh.",
    ]
    changes = _device_changes(report)
    for r, host in changes:
        out.append(f"# {r.object}: read_ahead_kb {r.current} -> {r.recommended}{_evidence(r)}")
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
    """A shell script that applies (or rolls back) the readahead changes now and installs (or removes) the rule."""
    changes = _device_changes(report)
    what = "rollback" if rollback else "apply"
    out = ["#!/bin/sh", f"# tuner readahead {what} — session {report.session.id}; run as root on {report.session.host}", "set -e"]
    for r, host in changes:
        out.append(f"# {r.object}: read_ahead_kb {r.recommended if rollback else r.current} -> "
                   f"{r.current if rollback else r.recommended}{'' if rollback else _evidence(r)}")
        out.append(host.rollback_blockdev if rollback else host.apply_blockdev)
        out.append(f"# or: {host.rollback_sysfs if rollback else host.apply_sysfs}")
    if changes:
        if rollback:
            out.append(f"rm -f {UDEV_RULE_FILE}")
        else:
            out.append(f"# persist: install 99-tuner-readahead.rules as {UDEV_RULE_FILE}")
        out.append(UDEV_RELOAD)
        out.append("# Files PostgreSQL already has open keep their old readahead: restart it to reach every backend.")
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
