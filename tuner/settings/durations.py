"""Durations as people write them in tuner.toml and on the command line: ``30s``, ``10m``, ``2h``, ``7d``, ``1h30m``.

Pure functions of text, below the configuration (which parses ``[daemon]`` durations with them) and the commands
(``tuner prune --older-than``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import timedelta

MAX_DURATION_S = 365 * 86400.0
_UNIT_S = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_UNIT_NAMES = {
    "d": "d", "day": "d", "days": "d",
    "h": "h", "hour": "h", "hours": "h",
    "m": "m", "min": "m", "mins": "m", "minute": "m", "minutes": "m",
    "s": "s", "sec": "s", "secs": "s", "second": "s", "seconds": "s",
}
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?", re.ASCII)
_PART = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-z]+)\s*", re.ASCII)
_EXAMPLES = "write it like 30s, 10m, 2h, 7d or 1h30m"


def parse_duration(text: str | float) -> float:
    """Seconds in a duration: ``30s``, ``10m``, ``2h``, ``7d``, ``1h30m`` (largest unit first, each unit once,
    spaces allowed; ``min``, ``hours``… spelt out work too), or a plain number of seconds (a TOML integer too).

    Raises ``ValueError`` with one sentence (no key name: the caller adds it) for junk, a negative or zero
    duration, and one longer than 365 days.
    """
    if isinstance(text, bool):  # a bool is an int to Python, never a duration to a user
        raise ValueError(f"{text!r} is not a duration: {_EXAMPLES}")
    if isinstance(text, int | float):
        if not math.isfinite(text):
            raise ValueError(f"{text!r} is not a duration: {_EXAMPLES}")
        return _checked(float(text), str(text))
    s = text.strip()
    if s.startswith("-"):
        raise ValueError(f"duration {text!r} is negative: it must be more than zero")
    if _NUMBER.fullmatch(s):
        return _checked(float(s), text)
    total, pos, seen = 0.0, 0, ""
    while pos < len(s):
        m = _PART.match(s, pos)
        if m is None:
            raise ValueError(f"{text!r} is not a duration: {_EXAMPLES}")
        unit = _UNIT_NAMES.get(m.group(2))
        if unit is None:
            raise ValueError(f"duration {text!r} has an unknown unit {m.group(2)!r}: use d, h, m or s, as in 1h30m")
        if seen and "dhms".index(unit) <= "dhms".index(seen[-1]):
            raise ValueError(f"duration {text!r} repeats a unit or puts a smaller one first: write it like 1h30m")
        seen += unit
        total += float(m.group(1)) * _UNIT_S[unit]
        pos = m.end()
    if not seen:
        raise ValueError(f"{text!r} is not a duration: {_EXAMPLES}")
    return _checked(total, text)


@dataclass(frozen=True)
class Duration:
    """A duration parsed once, at the edge: its length, and its ``text`` as the user wrote it (shown back so, in
    messages and by ``tuner config validate --print``)."""

    text: str
    delta: timedelta

    @classmethod
    def parse(cls, text: str) -> Duration:
        """:func:`parse_duration` of ``text``, kept with it; ``ValueError`` with its sentence."""
        return cls(text, timedelta(seconds=parse_duration(text)))

    @property
    def seconds(self) -> float:
        return self.delta.total_seconds()

    def __str__(self) -> str:
        return self.text


def _checked(seconds: float, text: str) -> float:
    if seconds < 0:
        raise ValueError(f"duration {text!r} is negative: it must be more than zero")
    if seconds == 0:
        raise ValueError(f"duration {text!r} is zero: it must be more than zero")
    if seconds > MAX_DURATION_S:
        raise ValueError(f"duration {text!r} is longer than the 365 days tuner accepts")
    return seconds


def format_duration(seconds: float) -> str:
    """``seconds`` the way :func:`parse_duration` reads it, for messages: ``7d``, ``10m``, ``1h30m``, ``1.5s``
    (to the millisecond), ``0s``."""
    if seconds < 0:
        return "-" + format_duration(-seconds)
    whole, ms = divmod(round(seconds * 1000), 1000)
    parts = []
    for unit in "dhm":
        n, whole = divmod(whole, _UNIT_S[unit])
        if n:
            parts.append(f"{n}{unit}")
    if whole or ms or not parts:
        parts.append(f"{whole}.{ms:03d}".rstrip("0").rstrip(".") + "s")
    return "".join(parts)
