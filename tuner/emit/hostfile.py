"""The body of a file that sets readahead on the host (the udev and tuned formats), and of its rollback twin: one
entry per device change, each under its evidence (or, in the rollback, the value it goes back to), a change
meant for PostgreSQL named with where it goes instead, and a sentence where nothing is written.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from tuner.emit import changes as ch
from tuner.emit import quote
from tuner.report.model import Recommendation, Report

BY_KERNEL_NAME = ("matched by kernel name: the device has no WWID or serial, and kernel names can change across "
                  "reboots")


def by_kernel_name(rec: Recommendation) -> bool:
    """Whether the device is matched by its kernel name only (it has no WWID, serial or other stable key)."""
    match = rec.device.match if rec.device else {}
    return set(match) == {"KERNEL"} and not match["KERNEL"].endswith("*")


def device_entries(report: Report, out: list[str], *, rollback: bool, what: str, reopen: str,
                   entry: Callable[[Recommendation, int], list[str]]) -> list[str]:
    """``out`` (the file's header, which ends with a blank line) and then the entries: ``entry(rec, n)`` gives the
    lines that set the ``n``-th written device (from 1) to its recommended value, or back to today's with
    ``rollback``; it raises :class:`quote.Unrenderable` for one it cannot write. ``what`` names the file in
    sentences; ``reopen`` says how the value reaches PostgreSQL's open files."""
    top = len(out)
    written = 0
    refused: list[str] = []
    for rec in ch.changes(report):
        if rec.scope != "device":
            if not rollback:
                out += [*quote.comment(ch.elsewhere(rec, what)), ""]
            continue
        lines, why = quote.attempt(partial(entry, rec, written + 1))
        head = (f"{ch.label(rec)}: back to {rec.current} (today's value, from the {rec.source})" if rollback
                else ch.evidence(rec, report))
        out += quote.comment(head)
        if lines is None:
            out += quote.comment(f"not written: {why}")
            refused.append(f"{ch.label(rec)} ({why})")
        else:
            if by_kernel_name(rec):
                out += quote.comment(BY_KERNEL_NAME)
            if not rollback:
                out += quote.comment(reopen)
            out += lines
            written += 1
        out.append("")
    if not written:
        note = ("nothing to roll back." if rollback and not refused else
                f"this file sets nothing: tuner refused to write {'; '.join(refused)}, so today's value is kept"
                if refused else ch.empty(report, what, "device"))
        out[top:top] = [*quote.comment(note), ""]
    return out

