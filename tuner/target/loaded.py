"""Whether the configuration files on disk are what the server last loaded, decided from what the server reports —
never from a file's modification time: a file copied with ``cp -p`` or ``rsync -t``, or touched back, keeps a time
older than the last reload whatever it now says.

``pg_file_settings`` re-reads the files when it is queried ("the current contents of the files, not what was last
applied by the server"); ``pg_settings`` is what this session's server process loaded, with the file and line each
value came from (https://www.postgresql.org/docs/current/view-pg-file-settings.html). Where the two disagree about a
setting a reload applies — its file, its line, or its value — the files changed and were not reloaded. Placeholders
(``tuner.role``) are not in ``pg_settings``, so the marker's own line cannot be compared: the settings around it
are, and a line added or moved above them moves theirs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

# pg_settings' units and what they are in bytes or milliseconds (guc.c: memory_unit_conversion_table,
# time_unit_conversion_table); a setting's unit may carry a multiple ("8kB").
_MEMORY: dict[str, float] = {"B": 1, "kB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}
_TIME: dict[str, float] = {"us": 0.001, "ms": 1, "s": 1000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
_NUMBER = re.compile(r"\s*([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)\s*([A-Za-z]*)\s*")
# parse_bool() in src/backend/utils/adt/bool.c takes any unique prefix of true/false/yes/no, and on/off/1/0.
_TRUE = {"on", "1", *("true"[:n] for n in range(1, 5)), *("yes"[:n] for n in range(1, 4))}
_FALSE = {"off", "of", "0", *("false"[:n] for n in range(1, 6)), *("no"[:n] for n in range(1, 3))}


def unloaded(rows: Sequence[Mapping[str, Any]]) -> str | None:
    """The first sign that the files on disk are not what the server loaded, as a phrase naming the setting and
    both sides; None when every compared setting agrees. ``rows``: ``config_lines.sql`` (a setting a reload
    applies, in force from a file or its default, beside the last line on disk that sets it, if any)."""
    for r in rows:
        name, disk_file = r["name"], r["on_disk_file"]
        loaded_at = _where(r["loaded_file"], r["loaded_line"])
        disk_at = _where(disk_file, r["on_disk_line"])
        if disk_file is None:
            if r["source"] == "configuration file":
                return f"{name} was loaded from {loaded_at or 'a configuration file'}, which no longer sets it"
            continue
        if r["source"] == "default":
            return f"{name} is set at {disk_at}, and the server has its default"
        if loaded_at is not None and loaded_at != disk_at:
            return f"{name} was loaded from {loaded_at}, and is set at {disk_at} now"
        if not same_value(r["on_disk"], r["loaded"], r["vartype"], r["unit"]):
            unit = f" (in {r['unit']})" if r["unit"] else ""
            return f"{name} is {r['on_disk']!r} at {disk_at}, and the server loaded {r['loaded']!r}{unit}"
    return None


def same_value(text: str, loaded: str, vartype: str, unit: str | None) -> bool:
    """Whether a file's ``text`` for a setting is the value ``pg_settings`` shows (``loaded``, in ``unit``). A text
    this cannot read counts as the same: the file's line and the other settings still decide."""
    if vartype == "bool":
        return _bool(text) is None or _bool(text) == _bool(loaded)
    if vartype in ("integer", "real"):
        file_value, shown = _in_unit(text, unit), _in_unit(loaded, unit)
        if file_value is None or shown is None:
            return True
        return math.isclose(file_value, shown, abs_tol=0.5 if vartype == "integer" else 1e-9, rel_tol=1e-9)
    # Enums take hidden aliases (wal_compression 'on' is shown as 'pglz') and strings pass check hooks that
    # rewrite them (DateStyle 'ISO' is shown as 'ISO, MDY'): the server's spelling cannot be predicted.
    return True


def _bool(text: str) -> bool | None:
    word = text.strip().lower()
    return True if word in _TRUE else False if word in _FALSE else None


def _in_unit(text: str, unit: str | None) -> float | None:
    """``text`` (a number, with a unit or in the setting's own) in the setting's unit; None if it is not one."""
    m = _NUMBER.fullmatch(text)
    if m is None:
        return None
    number, given = float(m.group(1)), m.group(2)
    if not given:
        return number
    base = _unit(unit)
    table = _MEMORY if given in _MEMORY else _TIME if given in _TIME else None
    if base is None or table is None or base[1] is not table:
        return None
    return number * table[given] / base[0]


def _unit(unit: str | None) -> tuple[float, dict[str, float]] | None:
    """A setting's unit ("8kB", "ms") as its size in bytes or milliseconds and the table it is from."""
    m = re.fullmatch(r"(\d*)([A-Za-z]+)", unit or "")
    if m is None:
        return None
    times = int(m.group(1) or 1)
    for table in (_MEMORY, _TIME):
        if m.group(2) in table:
            return times * table[m.group(2)], table
    return None


def _where(file: str | None, line: int | None) -> str | None:
    return f"{file}:{line}" if file is not None else None
