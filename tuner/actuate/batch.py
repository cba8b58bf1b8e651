"""A journal restored in batches: one server's entries (ALTER SYSTEM lines, the scratch schema, a paused replay) go
back over one connection with one reload — a restore used to connect once per entry — and every other entry on its
own. :meth:`tuner.actuate.journal.Journal._restore` walks the batches and rewrites the journal between them."""

from __future__ import annotations

from typing import Any

from tuner.actuate.alter_system import SERVER_KINDS, restore_server_entries, server_key
from tuner.actuate.entry import JournalError, Restored, not_restored
from tuner.actuate.sysfs import SysfsWriter, restore_sysfs


def batches(changes: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """``changes`` in their order, one server's entries (:func:`server_key`) gathered where the first of them is,
    every other entry on its own."""
    out: list[list[dict[str, Any]]] = []
    servers: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for change in changes:
        if change.get("kind") not in SERVER_KINDS:
            out.append([change])
        elif (key := server_key(change)) in servers:
            servers[key].append(change)
        else:
            servers[key] = [change]
            out.append(servers[key])
    return out


def restore_batch(writer: SysfsWriter, batch: list[dict[str, Any]], *, same_boot: bool,
                  dsn: str | None) -> list[Restored]:
    """One server's entries over one connection, or one sysfs entry: each as a :class:`Restored`."""
    outcomes: list[Restored | Exception]
    if batch[0].get("kind") in SERVER_KINDS:
        outcomes = restore_server_entries(batch, dsn)
    else:
        outcomes = []
        for change in batch:
            try:
                if change.get("kind") != "sysfs":
                    raise JournalError(f"unknown kind of journal entry: {change.get('kind')!r}")
                outcomes.append(restore_sysfs(writer, change, same_boot=same_boot))
            except Exception as exc:  # noqa: BLE001 - one failure must not keep the others from being put back
                outcomes.append(exc)
    return [o if isinstance(o, Restored) else not_restored(c, o) for c, o in zip(batch, outcomes, strict=True)]
