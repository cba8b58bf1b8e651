"""A journal file read back is checked like user input (as :mod:`tuner.report.validate` checks a report read back):
what it must look like to be read at all, and to be acted on.

A journal tells tuner what to write where, as root, when it is restored; so one that tuner did not write — damaged
(binary, cut short, wrong types, another format version) or crafted (a path outside the block devices' queues, a
setting that is not a WAL knob) — is refused as a whole with one sentence naming the file, the entry and the
problem: nothing in it is written. ``tuner restore --forget N`` (or ``--forget all``) drops what the operator has
looked at and put back by hand.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tuner.actuate import alter_system, sysfs
from tuner.actuate.entry import JournalInvalid

FORMAT_VERSION = 1
_OWNER = {"pid": int, "start": str, "host": str, "boot_id": str, "session": str, "opened_at": str, "ended_at": str}
_FIELDS = {"sysfs": sysfs.FIELDS, "alter_system": alter_system.FIELDS, "scratch_schema": alter_system.FIELDS,
           "replay_pause": alter_system.FIELDS}


def forget_hint(number: int | None = None) -> str:
    """What an operator does with a journal tuner refuses: entry ``number``, or (None) the whole file."""
    if number is None:
        return ("look at the file and put back by hand what it lists; then 'tuner restore --forget all' drops it "
                "without writing anything")
    return (f"look at the file; 'tuner restore --forget {number}' drops entry {number} without writing it (put "
            "back by hand what it changed), 'tuner restore --forget all' the whole journal")


def untrusted_hint() -> str:
    """What an operator does with a journal another user could have written (tuner acts on it as root)."""
    return ("keep [tuner] state_dir in a directory only root (or you) may write; if the file is yours, look at it, put "
            "back by hand what it lists, then 'tuner restore --forget all' drops it")


def parse(path: Path, raw: bytes) -> dict[str, Any]:
    """The journal document in ``raw`` (read from ``path``), its format and owner checked, not yet its entries."""
    def bad(problem: str) -> JournalInvalid:
        return JournalInvalid(f"the journal {path} is damaged: {problem}; nothing was restored", hint=forget_hint())

    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise bad("it is not text") from None
    if not text.strip():
        raise bad("it is empty")
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise bad(f"it is not complete JSON ({str(exc)[:120]})") from None
    except RecursionError:  # Python's json recurses: a crafted file of nested brackets
        raise bad("it nests deeper than any journal tuner writes") from None
    if not isinstance(doc, dict):
        raise bad("it is not a tuner journal (not a JSON object)")
    version = doc.get("version")
    if version != FORMAT_VERSION:
        newer = " (restore it with the tuner that wrote it)" if isinstance(version, int) and version > 1 else ""
        raise bad(f"its format version is {repr(version)[:40]}, and this tuner reads version {FORMAT_VERSION}{newer}")
    owner = doc.get("owner")
    if not isinstance(owner, dict):
        raise bad("it names no owner")
    for key, value in owner.items():
        if key not in _OWNER or (value is not None and not isinstance(value, _OWNER[key])):
            raise bad(f"its owner's {key[:40]!r} is {repr(value)[:80]}")
    if not isinstance(doc.get("changes"), list):
        raise bad("it has no list of changes")
    if set(doc) - {"version", "owner", "changes"}:
        raise bad(f"it has unknown fields {[k[:40] for k in sorted(set(doc) - {'version', 'owner', 'changes'})][:5]}")
    return doc


def entry_problem(change: Any, sys_root: Path) -> str | None:
    """Why one entry is not one tuner wrote (and may act on), or None."""
    if not isinstance(change, dict):
        return "is not an object"
    kind = change.get("kind")
    if kind not in _FIELDS:
        return f"is of an unknown kind {repr(kind)[:60]}"
    unknown = sorted(set(change) - _FIELDS[kind])
    if unknown:
        return f"has unknown fields {[_short(u) for u in unknown[:5]]}"
    if not isinstance(change.get("recorded_at", ""), str):
        return "has a recorded_at that is not text"
    return sysfs.entry_problem(change, sys_root) if kind == "sysfs" else alter_system.entry_problem(change)


def check(path: Path, doc: dict[str, Any], sys_root: Path) -> None:
    """Raise :class:`JournalInvalid` on the first entry of ``doc`` that tuner would not have written."""
    seen: dict[tuple[Any, ...], int] = {}
    for number, change in enumerate(doc["changes"], 1):
        problem = entry_problem(change, sys_root)
        if not problem:
            # tuner journals an object once, before its first change: a second entry is not one tuner wrote
            first = seen.setdefault(_object(change), number)
            problem = f"names what entry {first} names" if first != number else None
        if problem:
            raise JournalInvalid(f"the journal {path} is damaged: entry {number} {problem}; nothing was restored",
                                 hint=forget_hint(number))


def _object(change: dict[str, Any]) -> tuple[Any, ...]:
    """What an entry puts back: a sysfs path, or a setting (the scratch schema, the replay pause) on one server."""
    if change["kind"] == "sysfs":
        return ("sysfs", change.get("path"))
    return (change["kind"], change.get("name"), bool(change.get("standby")), change.get("system_identifier"),
            change.get("port"), change.get("sandbox_dir"))


def describe(change: Any) -> str:
    """One line for an entry, whatever it holds (for the listing and ``--forget``)."""
    if not isinstance(change, dict):
        return _short(change)
    original = change.get("original")
    where = change.get("device") or change.get("path")
    return (f"{_short(change.get('kind'))} {_short(where)} {_short(change.get('name'))} "
            f"(original {'(not set)' if original is None else _short(original)})")


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    text = text.encode("unicode_escape").decode("ascii")  # one line, printable
    return text if len(text) <= 60 else text[:57] + "..."
