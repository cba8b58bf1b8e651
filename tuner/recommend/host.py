"""Readahead as host commands: ``blockdev --setra`` (512-byte sectors), the sysfs form (KiB), and a udev rule that
persists the value — each with its rollback twin. Facts: reference/pg-io-facts.md §5.1, §5.4.
"""

from __future__ import annotations

from tuner.knobs.devices import BlockDevice
from tuner.model import HostCommands, RecommendationOut, Report

UDEV_RULE_FILE = "/etc/udev/rules.d/99-tuner-readahead.rules"
UDEV_RELOAD = "udevadm control --reload-rules && udevadm trigger --type=devices --action=change"


def _udev_quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def udev_rule(device: BlockDevice, read_ahead_kb: int) -> str:
    """One rule line that matches ``device`` by its most stable attribute and sets its readahead."""
    keys = ['ACTION=="add|change"', 'SUBSYSTEM=="block"']
    keys += [f'{k}=="{_udev_quote(v)}"' for k, v in device.match.items()]
    keys.append(f'ATTR{{queue/read_ahead_kb}}="{int(read_ahead_kb)}"')
    return ", ".join(keys)


def commands(device: BlockDevice, recommended_kb: int, current_kb: int) -> HostCommands:
    sysfs = device.read_ahead_path.as_posix().replace(device.sys_dir.as_posix(), f"/sys/block/{device.name}", 1)
    return HostCommands(
        apply_blockdev=f"blockdev --setra {2 * int(recommended_kb)} {device.node}",
        apply_sysfs=f"echo {int(recommended_kb)} > {sysfs}",
        rollback_blockdev=f"blockdev --setra {2 * int(current_kb)} {device.node}",
        rollback_sysfs=f"echo {int(current_kb)} > {sysfs}",
        udev_rule=udev_rule(device, recommended_kb),
        udev_rule_file=UDEV_RULE_FILE,
    )


def _device_changes(report: Report) -> list[RecommendationOut]:
    return [r for r in report.recommendations if r.decision == "change" and r.host is not None]


def render_rules(report: Report) -> str:
    """The udev rules file for every device whose readahead tuner recommends changing."""
    s = report.session
    out = [
        f"# tuner readahead rules — session {s.id}, {s.started_at:%Y-%m-%d %H:%M:%S} UTC, host {s.host}, kernel {s.kernel}",
        f"# Install as {UDEV_RULE_FILE}, then: {UDEV_RELOAD}",
        "# Rollback: remove this file and run the rollback commands in readahead-rollback.sh.",
    ]
    changes = _device_changes(report)
    for r in changes:
        assert r.host is not None
        out.append(f"# {r.object}: read_ahead_kb {r.current} -> {r.recommended}{_evidence(r)}")
        if 'KERNEL=="' in r.host.udev_rule and "loop*" not in r.host.udev_rule:
            out.append("# (matched by kernel name: it has no WWID or serial; kernel names can change across reboots)")
        out.append(r.host.udev_rule)
    if not changes:
        out.append("# nothing to change.")
    return "\n".join(out) + "\n"


def _evidence(r: RecommendationOut) -> str:
    if r.effect is None:
        return ""
    e = r.effect
    return f", measured {e.improvement:.2f}x faster, 95% CI [{e.ci95[0]:.2f}, {e.ci95[1]:.2f}], n = {e.n_pairs} pairs"


def render_script(report: Report, *, rollback: bool = False) -> str:
    """A shell script that applies (or rolls back) the readahead changes now and installs (or removes) the rule."""
    changes = _device_changes(report)
    what = "rollback" if rollback else "apply"
    out = ["#!/bin/sh", f"# tuner readahead {what} — session {report.session.id}; run as root on {report.session.host}", "set -e"]
    for r in changes:
        assert r.host is not None
        out.append(f"# {r.object}: read_ahead_kb {r.recommended if rollback else r.current} -> "
                   f"{r.current if rollback else r.recommended}{'' if rollback else _evidence(r)}")
        out.append(r.host.rollback_blockdev if rollback else r.host.apply_blockdev)
        out.append(f"# or: {r.host.rollback_sysfs if rollback else r.host.apply_sysfs}")
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
