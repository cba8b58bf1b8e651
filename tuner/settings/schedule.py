"""Maintenance windows and crontab schedules (``[daemon] windows`` and ``schedule``): pure functions of text and time,
below the configuration that parses them. Durations are :mod:`tuner.settings.durations`.

* :func:`parse_window` / :func:`parse_windows`: ``"Sat 01:00-05:00"``, ``"Mon-Fri 22:00-04:00"``,
  ``"Sat,Sun 00:00-06:00"``, ``"daily 01:00-05:00"`` (or ``"*"``, or no day at all). A window whose end is not
  after its start runs past midnight and belongs to the day it starts on; ``24:00`` is allowed as an end.
* :func:`parse_crontab`: five crontab fields, with crontab's meaning, as an APScheduler ``CronTrigger``.

Times of day are wall-clock times in the daemon's time zone: :func:`local_timezone` unless a ``tz`` is given. A
window opens at the first moment the clocks read its start and closes at the first moment they read its end, so
"Sun 01:00-05:00" lasts three hours on the night clocks go forward and five on the night they go back. A start or
end the clocks skip (02:30 when they jump from 02:00 to 03:00) happens at the jump; a window that lies wholly in
the skipped hour does not open that day; one inside the repeated hour opens once, on the first pass.

Methods take time zone-aware datetimes (a naive one is a ``ValueError``) in any zone, and return them in UTC:
Python subtracts and compares two datetimes that share a ``tzinfo`` by their wall-clock readings, which is an hour
off across a clock change — ``closes_at(now) - now`` is exact only in UTC. Convert with ``.astimezone(window.tz)``
to show a time to people.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from datetime import UTC, date, datetime, timedelta, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

if TYPE_CHECKING:
    from apscheduler.triggers.cron import CronTrigger

# -- the local time zone ---------------------------------------------------------------------------------------

def local_timezone() -> tzinfo:
    """The daemon's time zone, with its DST rules: ``TZ`` when it names a zone (``Europe/Berlin``, ``:UTC``, a
    zoneinfo file), else ``/etc/localtime``. Only when neither can be read, the fixed offset the C library uses
    now (``datetime.now().astimezone().tzinfo``), which does not follow DST changes.

    Pass the same zone to the scheduler (``AsyncIOScheduler(timezone=local_timezone())``) so that crontab
    schedules and maintenance windows read the same clock.
    """
    env = os.environ.get("TZ")
    if env is not None:
        name = env.removeprefix(":")
        if name in ("", "UTC", "UTC0", "GMT", "GMT0"):
            return ZoneInfo("UTC")
        zone = _zone_file(Path(name)) if name.startswith("/") else _zone_named(name)
        if zone is not None:
            return zone
    else:
        localtime = Path("/etc/localtime")
        # A symbolic link into a zoneinfo tree names the zone: ZoneInfo(key) is cached, so equal windows compare equal.
        target = os.path.realpath(localtime)
        _, sep, key = target.rpartition("/zoneinfo/")
        zone = (_zone_named(key) if sep else None) or _zone_file(localtime)
        if zone is not None:
            return zone
    fixed = datetime.now().astimezone().tzinfo
    return fixed if fixed is not None else UTC


def _zone_named(key: str) -> tzinfo | None:
    try:
        return ZoneInfo(key)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return None


_FILE_ZONES: dict[tuple[str, int, int], tzinfo] = {}


def _zone_file(path: Path) -> tzinfo | None:
    try:
        st = path.stat()
        cache_key = (str(path), st.st_mtime_ns, st.st_size)
        if cache_key not in _FILE_ZONES:  # one object per file version, so windows parsed twice compare equal
            with path.open("rb") as f:
                _FILE_ZONES[cache_key] = ZoneInfo.from_file(f, key=str(path))
        return _FILE_ZONES[cache_key]
    except (OSError, ValueError):
        return None


# -- maintenance windows ---------------------------------------------------------------------------------------

DAY_NAMES = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_DAY = {name.lower(): i for i, name in enumerate(DAY_NAMES)}
_WINDOW = re.compile(r"(?P<days>.*?)\s*(?P<start>[0-9]{1,2}:[0-9]{2})\s*-\s*(?P<end>[0-9]{1,2}:[0-9]{2})", re.ASCII)
_SEARCH_DAYS = 22  # far enough ahead to pass a weekly window that fell into a skipped hour
_EXAMPLE_WINDOW = "write it like 'Sat 01:00-05:00', 'Mon-Fri 22:00-04:00' or 'daily 01:00-05:00'"


@dataclass(frozen=True)
class Window:
    """One recurring maintenance window, in wall-clock time of ``tz``.

    ``days`` are the days it starts on (0 = Monday … 6 = Sunday); it opens at ``start_minute`` (minutes after
    midnight, 0…1439) and closes at ``end_minute`` (1…1440) of the same day, or of the next day when
    ``end_minute <= start_minute``.
    """

    days: frozenset[int]
    start_minute: int
    end_minute: int
    tz: tzinfo = field(default_factory=local_timezone)

    def __post_init__(self) -> None:
        if not self.days or not self.days <= frozenset(range(7)):
            raise ValueError(f"a window needs days from 0 (Monday) to 6 (Sunday), not {sorted(self.days)}")
        if not (0 <= self.start_minute < 1440 and 0 < self.end_minute <= 1440 and self.start_minute != self.end_minute):
            raise ValueError(f"a window cannot run from minute {self.start_minute} to minute {self.end_minute}")

    def __str__(self) -> str:
        return f"{_format_days(self.days)} {_hhmm(self.start_minute)}-{_hhmm(self.end_minute)}"

    @property
    def duration_s(self) -> float:
        """Nominal length in seconds (on a day without a clock change)."""
        return float(((self.end_minute - self.start_minute - 1) % 1440 + 1) * 60)

    def contains(self, dt: datetime) -> bool:
        """Whether the window is open at ``dt``."""
        t = _utc(dt)
        return any(o <= t < c for o, c in self._around(t))

    def closes_at(self, dt: datetime) -> datetime | None:
        """When (UTC) the open period around ``dt`` ends, openings that follow on without a gap included; None
        when the window is closed at ``dt``, or never closes (``daily 00:00-24:00``)."""
        return _closes_at((self,), dt)

    def next_open(self, dt: datetime) -> datetime:
        """The first moment at or after ``dt`` when the window is open: ``dt`` itself when it is open then,
        else the start (UTC) of the next opening."""
        t = _utc(dt)
        first = None
        for o, c in self._openings(_local_date(t, self.tz) - timedelta(days=2), _SEARCH_DAYS):
            if o <= t < c:
                return dt
            if o > t and (first is None or o < first):
                first = o
        if first is None:  # every opening for three weeks fell into a skipped hour: no real zone does that
            raise ValueError(f"window {self} does not open in the {_SEARCH_DAYS} days after {dt.isoformat()}")
        return first

    def _around(self, t: datetime) -> Iterator[tuple[datetime, datetime]]:
        # An opening lasts less than two days, but a clock that goes back across midnight can bring the wall
        # date back by one: look two days back and one ahead.
        return self._openings(_local_date(t, self.tz) - timedelta(days=2), 4)

    def _openings(self, first: date, n_days: int) -> Iterator[tuple[datetime, datetime]]:
        """The openings that start on ``n_days`` local dates from ``first``, as [open, close) in UTC."""
        end_offset = self.end_minute + (1440 if self.end_minute <= self.start_minute else 0)
        for i in range(n_days):
            day = first + timedelta(days=i)
            if day.weekday() not in self.days:
                continue
            midnight = datetime(day.year, day.month, day.day)
            opens = _instant(midnight + timedelta(minutes=self.start_minute), self.tz)
            closes = _instant(midnight + timedelta(minutes=end_offset), self.tz)
            if closes > opens:  # empty when it lies wholly in the hour the clocks skip
                yield opens, closes


@dataclass(frozen=True)
class Windows:
    """A set of maintenance windows; open when any of them is. No windows at all means always open."""

    windows: tuple[Window, ...] = ()
    written: tuple[str, ...] = field(default=(), compare=False)  # as the configuration spelt them, when parsed

    def __str__(self) -> str:
        return ", ".join(str(w) for w in self.windows) if self.windows else "always"

    @property
    def texts(self) -> tuple[str, ...]:
        """The windows as the user wrote them (as :func:`parse_window` reads them, when built without text)."""
        return self.written if self.written else tuple(str(w) for w in self.windows)

    @property
    def always_open(self) -> bool:
        return not self.windows

    def contains(self, dt: datetime) -> bool:
        """Whether any window is open at ``dt`` (True for no windows)."""
        _utc(dt)
        return not self.windows or any(w.contains(dt) for w in self.windows)

    def closes_at(self, dt: datetime) -> datetime | None:
        """When (UTC) the open period around ``dt`` ends, windows that overlap or follow on without a gap taken
        together; None when closed at ``dt``, with no windows, or when the windows never all close."""
        if not self.windows:
            _utc(dt)
            return None
        return _closes_at(self.windows, dt)

    def next_open(self, dt: datetime) -> datetime:
        """``dt`` itself when open then (always, with no windows), else the start (UTC) of the next opening."""
        if self.contains(dt):
            return dt
        return min(w.next_open(dt) for w in self.windows)


def parse_window(text: str, *, tz: tzinfo | None = None) -> Window:
    """A :class:`Window` from ``"DAYS HH:MM-HH:MM"``.

    DAYS is a comma-separated list of English three-letter day names (any case) and ranges (``Mon-Fri``;
    ``Fri-Mon`` wraps over the weekend), or ``daily`` or ``*``, or nothing (daily). ``tz`` defaults to
    :func:`local_timezone`. Raises ``ValueError`` with one sentence.
    """
    m = _WINDOW.fullmatch(text.strip())
    if m is None:
        raise ValueError(f"{text!r} is not a maintenance window: {_EXAMPLE_WINDOW}")
    days = _parse_days(m.group("days"), text)
    start = _minute(m.group("start"), text)
    end = _minute(m.group("end"), text)
    if start == 1440:
        raise ValueError(f"window {text!r} starts at 24:00: write 00:00 of the next day")
    if start == end:
        raise ValueError(f"window {text!r} starts and ends at {m.group('start')}: write 00:00-24:00 for a whole day")
    # "22:00-00:00" and "22:00-24:00" are one window: keep one form, so that equal windows compare equal.
    end = end or 1440
    return Window(days=days, start_minute=start, end_minute=end, tz=tz if tz is not None else local_timezone())


def parse_windows(texts: str | Iterable[str], *, tz: tzinfo | None = None) -> Windows:
    """:class:`Windows` from a list of :func:`parse_window` texts (a single string is one window); an empty list
    is always open."""
    items = [texts] if isinstance(texts, str) else list(texts)
    zone = tz if tz is not None else local_timezone()
    return Windows(tuple(parse_window(t, tz=zone) for t in items), written=tuple(items))


def _parse_days(text: str, whole: str) -> frozenset[int]:
    spec = text.strip().lower()
    if spec in ("", "*", "daily"):
        return frozenset(range(7))
    days: set[int] = set()
    for item in spec.split(","):
        first, dash, last = (part.strip() for part in item.partition("-"))
        a, b = _DAY.get(first), _DAY.get(last) if dash else _DAY.get(first)
        if a is None or b is None:
            bad = first if a is None else last
            raise ValueError(
                f"window {whole!r} names an unknown day {bad!r}: use Mon, Tue, Wed, Thu, Fri, Sat, Sun, daily or *"
            )
        days.update((a + i) % 7 for i in range((b - a) % 7 + 1))
    return frozenset(days)


def _minute(hhmm: str, whole: str) -> int:
    h, mm = (int(p) for p in hhmm.split(":"))
    if h > 24 or mm > 59 or (h == 24 and mm != 0):
        raise ValueError(f"window {whole!r} has no such time of day as {hhmm}: use 00:00 to 24:00")
    return h * 60 + mm


def _hhmm(minute: int) -> str:
    return f"{minute // 60:02d}:{minute % 60:02d}"


def _format_days(days: frozenset[int]) -> str:
    if len(days) == 7:
        return "daily"
    runs: list[list[int]] = []
    for d in sorted(days):
        if runs and runs[-1][-1] == d - 1:
            runs[-1].append(d)
        else:
            runs.append([d])
    return ",".join(DAY_NAMES[r[0]] if len(r) == 1 else f"{DAY_NAMES[r[0]]}-{DAY_NAMES[r[-1]]}" for r in runs)


def _utc(dt: datetime) -> datetime:
    if dt.tzinfo is None or dt.utcoffset() is None:
        raise ValueError(f"maintenance windows need a time zone-aware datetime, not {dt.isoformat()}")
    return dt.astimezone(UTC)


def _local_date(t: datetime, tz: tzinfo) -> date:
    return t.astimezone(tz).date()


def _instant(wall: datetime, tz: tzinfo) -> datetime:
    """The first moment (UTC) the clocks of ``tz`` read the naive wall-clock time ``wall``, or the moment they
    jump past it when they skip it."""
    candidates = [wall.replace(tzinfo=tz, fold=fold).astimezone(UTC) for fold in (0, 1)]
    real = [t for t in candidates if t.astimezone(tz).replace(tzinfo=None) == wall]
    if real:
        return min(real)  # during the repeated hour: its first pass
    # Skipped: the jump lies between the two readings. Find the first whole second the clocks read ``wall`` or
    # later (offsets and jumps are whole seconds): bisection keeps reading(lo) < wall <= reading(hi).
    lo, hi = (int(t.timestamp()) for t in sorted(candidates))
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if datetime.fromtimestamp(mid, tz).replace(tzinfo=None) >= wall:
            hi = mid
        else:
            lo = mid
    return datetime.fromtimestamp(hi, UTC)


def _closes_at(windows: tuple[Window, ...], dt: datetime) -> datetime | None:
    t = _utc(dt)
    end, limit = t, t + timedelta(days=_SEARCH_DAYS)
    while True:
        ends = [c for w in windows for o, c in w._around(end) if o <= end < c]
        if not ends:
            return None if end == t else end
        end = max(ends)
        if end > limit:  # open for three weeks on end: these windows never close
            return None


# -- crontab ---------------------------------------------------------------------------------------------------

_CRON_FIELDS = ("minute", "hour", "day", "month", "day_of_week")
_CRON_FIELD_NAMES = {"minute": "minute", "hour": "hour", "day": "day", "month": "month", "day_of_week": "weekday"}
_CRON_MACROS = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}
_CRON_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat", "sun")  # crontab numbers: 0 and 7 are Sunday
_CRON_NUMERIC_DAY = re.compile(r"(\*|[0-9]+)(?:-([0-9]+))?(?:/([0-9]+))?", re.ASCII)


def parse_crontab(text: str, *, tz: tzinfo | None = None) -> CronTrigger:
    """An APScheduler ``CronTrigger`` for a crontab line: five fields (minute hour day month weekday) or one of
    ``@hourly``, ``@daily``, ``@weekly``, ``@monthly``, ``@yearly``, in ``tz`` (default :func:`local_timezone`).

    Weekdays mean what they mean in crontab (0 and 7 are Sunday, 1-5 Monday to Friday): APScheduler 3 numbers
    them from Monday, so numbers are translated to names first. A line that restricts both the day of the month
    and the weekday is refused: crontab runs it on either, APScheduler only on days that are both. Raises
    ``ValueError`` with one sentence, also for a schedule that never fires (``0 2 31 2 *``).
    """
    # APScheduler (with tzlocal) costs ~0.2 s to import; the configuration imports this module, so every command
    # would pay it, and only a configuration with a schedule needs it.
    from apscheduler.triggers.cron import CronTrigger

    line = _CRON_MACROS.get(text.strip().lower(), text.strip())
    fields = line.split()
    if len(fields) != 5:
        raise ValueError(
            f"schedule {text!r} needs 5 fields (minute hour day month weekday), it has {len(fields)}"
        )
    values = dict(zip(_CRON_FIELDS, fields, strict=True))
    values["day_of_week"] = _cron_weekdays(values["day_of_week"], text)
    zone = tz if tz is not None else local_timezone()
    for (name, value), original in zip(values.items(), fields, strict=True):  # one at a time, to name the bad one
        try:
            CronTrigger(**{name: value}, timezone=zone)
        except ValueError as exc:
            reason = re.sub(r"^Error validating expression '[^']*': ", "", str(exc)).rstrip(".")
            reason = reason[:1].lower() + reason[1:]
            raise ValueError(
                f"schedule {text!r} has an invalid {_CRON_FIELD_NAMES[name]} field {original!r} ({reason})"
            ) from None
    if not values["day"].startswith("*") and not fields[4].startswith("*"):
        raise ValueError(
            f"schedule {text!r} restricts both the day of the month and the weekday, which crontab reads as "
            "either and tuner's scheduler as both: use '*' for one of them"
        )
    try:
        trigger = CronTrigger(**values, timezone=zone)
    except ValueError as exc:
        raise ValueError(f"schedule {text!r} is not a valid crontab line ({str(exc).rstrip('.')})") from None
    if trigger.get_next_fire_time(None, datetime.now(zone)) is None:
        raise ValueError(f"schedule {text!r} never fires")
    return trigger


@dataclass(frozen=True)
class Schedule:
    """A crontab line as written (``text``) and its trigger, parsed once by :func:`parse_crontab` on first use.

    Lazily, because APScheduler costs ~0.2 s to import and only the daemon needs a trigger: the configuration
    touches :attr:`trigger` when it reads a line from a file (so that a bad one is refused there), and its default
    line is parsed only when a daemon schedules it.
    """

    text: str
    tz: tzinfo | None = field(default=None, compare=False)

    def __str__(self) -> str:
        return self.text

    @cached_property
    def trigger(self) -> CronTrigger:
        return parse_crontab(self.text, tz=self.tz)


def _cron_weekdays(spec: str, text: str) -> str:
    """A crontab weekday field with its numbers (Sunday = 0 or 7) rewritten as the day names APScheduler reads."""
    out: list[str] = []
    for item in spec.lower().split(","):
        m = _CRON_NUMERIC_DAY.fullmatch(item)
        if m is None or item == "*":
            out.append(item)  # "*", names and name ranges mean the same to both
            continue
        first, last, step = m.group(1), m.group(2), m.group(3)
        if first == "*":
            if last is not None:
                out.append(item)  # "*-3" is invalid in either reading: let the check say so
                continue
            lo, hi = 0, 6
        else:
            lo = int(first)
            hi = int(last) if last is not None else (6 if step is not None else lo)
        if lo > 7 or hi > 7 or lo > hi or (step is not None and int(step) == 0):
            raise ValueError(
                f"schedule {text!r} has an invalid weekday field {spec!r}: use 0-7 (0 and 7 are Sunday) or "
                "mon-fri, in increasing order"
            )
        names = {_CRON_DAYS[d] for d in range(lo, hi + 1, int(step) if step is not None else 1)}
        out.extend(n for n in _CRON_DAYS[:7] if n in names)
    return ",".join(dict.fromkeys(out))
