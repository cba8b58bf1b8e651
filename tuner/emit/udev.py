"""``udev/99-tuner-readahead.rules``: the readahead rule (:func:`tuner.emit.host.udev_rule`) as a format of its own,
and its rollback twin — the same rule with today's value, which ``udevadm trigger`` writes back at once.

A rule matches its device by the most stable key the device has (a WWID, a serial, a device-mapper UUID, a loop
device's backing file); only a device with none of them is matched by its kernel name, and the file says so.
"""

from __future__ import annotations

from functools import partial
from typing import ClassVar

from tuner.emit import changes as ch
from tuner.emit import host as host_emit
from tuner.emit import quote
from tuner.emit.changes import device_entries
from tuner.emit.twin import ROLLBACK_DIR, ApplyRollback, file_text
from tuner.report.model import Recommendation, Report

FILE = "udev/99-tuner-readahead.rules"
ROLLBACK_FILE = ROLLBACK_DIR + FILE
REOPEN = ("PostgreSQL's open files keep their old readahead: restart PostgreSQL (or recycle its connections) to "
          "reach every backend")
WHAT = "udev rules"


def rule(rec: Recommendation, *, rollback: bool = False) -> str:
    """The rule that sets ``rec``'s device to the recommended value (or back to today's). Raises
    quote.Unrenderable for what host.py would not write either."""
    if host_emit.commands(rec) is None or rec.device is None:
        raise quote.Unrenderable(host_emit.not_rendered(rec) or f"no device for {rec.object}")
    kb = quote.integer(rec.current if rollback else rec.recommended, "read_ahead_kb")
    return host_emit.udev_rule(rec.device, kb)


def _apply(report: Report, *, rollback: bool) -> str:
    """The reload-and-trigger command for the devices this file writes a rule for, and no other."""
    written = [r.device for r in ch.changes(report)
               if r.scope == "device" and r.device is not None and quote.attempt(partial(rule, r, rollback=rollback))[0]]
    return host_emit.udev_reload(written)


def render(report: Report, *, rollback: bool = False) -> str:
    lines = [f"99-tuner-readahead.rules: {ch.provenance(report)}", ch.measured_on(report)]
    apply = _apply(report, rollback=rollback)
    if rollback:
        lines.append(f"Rollback of session {report.session.id}: install it in place of "
                     f"{host_emit.UDEV_RULE_FILE}, then run: {apply}. It writes back today's values; today's "
                     "values came from the kernel, so once they are back you may delete the file.")
    else:
        lines += [f"Install as {host_emit.UDEV_RULE_FILE} on the host, as root, then run: {apply}. "
                  "tuner export --format udev rewrites the file.",
                  "Rollback: rollback/udev/99-tuner-readahead.rules in place of this file, then the same commands."]
    out = [c for line in lines for c in quote.comment(line)] + [""]
    return file_text(device_entries(report, out, rollback=rollback, what=WHAT, reopen=REOPEN,
                                    entry=lambda rec, _n: [rule(rec, rollback=rollback)]))


class Udev(ApplyRollback):
    """The readahead udev rule, and its rollback twin."""

    name: ClassVar[str] = "udev"
    parts = ((FILE, render),)
