"""Durations, maintenance windows and crontab schedules: what operators write in [daemon], read the way they mean
it — wall-clock times in the daemon's zone, also on the nights the clocks change."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tuner.settings.durations import format_duration, parse_duration
from tuner.settings.schedule import (
    DAY_NAMES,
    Window,
    Windows,
    local_timezone,
    parse_crontab,
    parse_window,
    parse_windows,
)

BERLIN = ZoneInfo("Europe/Berlin")
# 2026: clocks go forward on Sunday 29 March at 02:00 CET (01:00 UTC), back on Sunday 25 October at 03:00 CEST.
SPRING = datetime(2026, 3, 29, tzinfo=BERLIN)
AUTUMN = datetime(2026, 10, 25, tzinfo=BERLIN)


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def at(text: str, when: datetime, tz: ZoneInfo = BERLIN) -> bool:
    return parse_window(text, tz=tz).contains(when)


# -- durations ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "seconds"), [
    ("30s", 30), ("10m", 600), ("2h", 7200), ("7d", 604800), ("1h30m", 5400), ("1d12h", 129600),
    ("90", 90), ("1.5", 1.5), (" 1h 30m ", 5400), ("1.5h", 5400), ("10min", 600), ("2hours", 7200),
    ("365d", 365 * 86400), (600, 600), (0.5, 0.5),
])
def test_durations_read_as_seconds(text: str | float, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(("text", "message"), [
    ("-5m", "duration '-5m' is negative: it must be more than zero"),
    ("-30", "duration '-30' is negative: it must be more than zero"),
    ("0", "duration '0' is zero: it must be more than zero"),
    ("0h0m", "duration '0h0m' is zero: it must be more than zero"),
    ("366d", "duration '366d' is longer than the 365 days tuner accepts"),
    ("365d1s", "duration '365d1s' is longer than the 365 days tuner accepts"),
    ("abc", "'abc' is not a duration: write it like 30s, 10m, 2h, 7d or 1h30m"),
    ("", "'' is not a duration: write it like 30s, 10m, 2h, 7d or 1h30m"),
    ("1h30", "'1h30' is not a duration: write it like 30s, 10m, 2h, 7d or 1h30m"),
    ("1e3", "duration '1e3' has an unknown unit 'e': use d, h, m or s, as in 1h30m"),
    ("10x", "duration '10x' has an unknown unit 'x': use d, h, m or s, as in 1h30m"),
    ("10M", "'10M' is not a duration: write it like 30s, 10m, 2h, 7d or 1h30m"),  # minutes or months? neither
    ("30m1h", "duration '30m1h' repeats a unit or puts a smaller one first: write it like 1h30m"),
    ("1h1h", "duration '1h1h' repeats a unit or puts a smaller one first: write it like 1h30m"),
    (True, "True is not a duration: write it like 30s, 10m, 2h, 7d or 1h30m"),
    (float("inf"), "inf is not a duration: write it like 30s, 10m, 2h, 7d or 1h30m"),
    (-1, "duration '-1' is negative: it must be more than zero"),
])
def test_bad_durations_are_refused_with_one_sentence(text: str | float, message: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_duration(text)
    assert str(err.value) == message
    assert "\n" not in message


@pytest.mark.parametrize(("seconds", "text"), [
    (604800, "7d"), (600, "10m"), (5400, "1h30m"), (30, "30s"), (90061, "1d1h1m1s"), (1.5, "1.5s"), (0, "0s"),
    (3600.0000001, "1h"), (-90, "-1m30s"),
])
def test_format_duration_writes_what_parse_duration_reads(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@given(st.integers(min_value=1, max_value=365 * 86400))
def test_whole_second_durations_round_trip(seconds: int) -> None:
    assert parse_duration(format_duration(seconds)) == seconds


# -- windows: parsing --------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "days", "start", "end"), [
    ("Sat 01:00-05:00", {5}, 60, 300),
    ("Mon-Fri 22:00-04:00", {0, 1, 2, 3, 4}, 1320, 240),
    ("Sat,Sun 00:00-06:00", {5, 6}, 0, 360),
    ("daily 01:00-05:00", set(range(7)), 60, 300),
    ("* 01:00-05:00", set(range(7)), 60, 300),
    ("01:00-05:00", set(range(7)), 60, 300),
    ("Fri-Mon 1:00-24:00", {4, 5, 6, 0}, 60, 1440),
    ("mon-wed, FRI  00:00 - 24:00", {0, 1, 2, 4}, 0, 1440),
    ("DAILY 23:30-00:15", set(range(7)), 1410, 15),
    ("Sat 22:00-00:00", {5}, 1320, 1440),  # the same as 22:00-24:00
])
def test_windows_are_parsed(text: str, days: set[int], start: int, end: int) -> None:
    w = parse_window(text, tz=BERLIN)
    assert (w.days, w.start_minute, w.end_minute, w.tz) == (frozenset(days), start, end, BERLIN)


@pytest.mark.parametrize(("text", "message"), [
    ("Xyz 01:00-02:00",
     "window 'Xyz 01:00-02:00' names an unknown day 'xyz': use Mon, Tue, Wed, Thu, Fri, Sat, Sun, daily or *"),
    ("Saturday 01:00-02:00",
     "window 'Saturday 01:00-02:00' names an unknown day 'saturday': use Mon, Tue, Wed, Thu, Fri, Sat, Sun, "
     "daily or *"),
    ("Mon- 01:00-02:00",
     "window 'Mon- 01:00-02:00' names an unknown day '': use Mon, Tue, Wed, Thu, Fri, Sat, Sun, daily or *"),
    ("Sat 25:00-26:00", "window 'Sat 25:00-26:00' has no such time of day as 25:00: use 00:00 to 24:00"),
    ("Sat 01:60-02:00", "window 'Sat 01:60-02:00' has no such time of day as 01:60: use 00:00 to 24:00"),
    ("Sat 24:30-02:00", "window 'Sat 24:30-02:00' has no such time of day as 24:30: use 00:00 to 24:00"),
    ("Sat 24:00-02:00", "window 'Sat 24:00-02:00' starts at 24:00: write 00:00 of the next day"),
    ("Sat 01:00-01:00", "window 'Sat 01:00-01:00' starts and ends at 01:00: write 00:00-24:00 for a whole day"),
    ("Sat 1-5", "'Sat 1-5' is not a maintenance window: write it like 'Sat 01:00-05:00', 'Mon-Fri 22:00-04:00' "
                "or 'daily 01:00-05:00'"),
    ("", "'' is not a maintenance window: write it like 'Sat 01:00-05:00', 'Mon-Fri 22:00-04:00' "
         "or 'daily 01:00-05:00'"),
])
def test_bad_windows_are_refused_with_one_sentence(text: str, message: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_window(text, tz=BERLIN)
    assert str(err.value) == message


@pytest.mark.parametrize("index", range(7))
@pytest.mark.parametrize("spell", [str.lower, str.upper, str.title])
def test_every_day_name_in_any_case_opens_on_that_day_only(index: int, spell: Callable[[str], str]) -> None:
    w = parse_window(f"{spell(DAY_NAMES[index])} 10:00-11:00", tz=BERLIN)
    monday = datetime(2026, 12, 7, 10, 30, tzinfo=BERLIN)
    opened = [d for d in range(7) if w.contains(monday + timedelta(days=d))]
    assert opened == [index]


def test_a_window_prints_as_it_is_read_back() -> None:
    for text in ("Sat 01:00-05:00", "Mon-Fri 22:00-04:00", "Mon,Wed,Sat-Sun 00:00-24:00", "daily 23:30-00:15"):
        w = parse_window(text, tz=BERLIN)
        assert str(w) == text and parse_window(str(w), tz=BERLIN) == w
    assert str(parse_window("fri-mon 1:00-2:00", tz=BERLIN)) == "Mon,Fri-Sun 01:00-02:00"
    assert str(Windows()) == "always"


# -- windows: when they are open ---------------------------------------------------------------------------------

def test_a_window_is_open_from_its_start_up_to_but_not_at_its_end() -> None:
    sat = datetime(2026, 12, 12, tzinfo=BERLIN)  # a Saturday
    assert not at("Sat 01:00-05:00", sat + timedelta(minutes=59, seconds=59))
    assert at("Sat 01:00-05:00", sat + timedelta(hours=1))
    assert at("Sat 01:00-05:00", sat + timedelta(hours=4, minutes=59, seconds=59))
    assert not at("Sat 01:00-05:00", sat + timedelta(hours=5))
    assert not at("Sat 01:00-05:00", sat + timedelta(days=1, hours=2))  # Sunday


def test_a_window_past_midnight_belongs_to_the_day_it_starts_on() -> None:
    fri = datetime(2026, 12, 11, tzinfo=BERLIN)
    w = "Mon-Fri 22:00-04:00"
    assert at(w, fri + timedelta(hours=23))  # Friday night
    assert at(w, fri + timedelta(days=1, hours=3))  # early Saturday: still Friday's window
    assert not at(w, fri + timedelta(days=1, hours=23))  # Saturday night: none
    assert not at(w, fri + timedelta(days=3, hours=3))  # early Monday: Sunday had none
    assert at(w, fri + timedelta(days=3, hours=22))  # Monday night
    w_end = parse_window(w, tz=BERLIN)
    assert w_end.closes_at(fri + timedelta(hours=23)) == fri + timedelta(days=1, hours=4)
    assert w_end.next_open(fri + timedelta(days=1, hours=5)) == fri + timedelta(days=3, hours=22)


def test_24_00_ends_a_window_at_the_next_midnight() -> None:
    w = parse_window("Sat 20:00-24:00", tz=BERLIN)
    sat = datetime(2026, 12, 12, tzinfo=BERLIN)
    assert w.contains(sat + timedelta(hours=23, minutes=59))
    assert not w.contains(sat + timedelta(days=1))
    assert w.closes_at(sat + timedelta(hours=21)) == sat + timedelta(days=1)


def test_no_windows_means_always_open() -> None:
    now = datetime(2026, 12, 6, 5, 28, tzinfo=BERLIN)
    always = parse_windows([])
    assert always.always_open and always.contains(now)
    assert always.closes_at(now) is None
    assert always.next_open(now) is now


def test_windows_that_touch_make_one_open_period() -> None:
    ws = parse_windows(["Sat 22:00-24:00", "Sun 00:00-03:00", "Sun 02:00-04:00"], tz=BERLIN)
    sat = datetime(2026, 12, 12, tzinfo=BERLIN)
    assert ws.closes_at(sat + timedelta(hours=23)) == sat + timedelta(days=1, hours=4)
    assert ws.next_open(sat + timedelta(hours=12)) == sat + timedelta(hours=22)
    assert ws.closes_at(sat + timedelta(hours=12)) is None  # closed then
    one = parse_window("Mon,Tue 00:00-24:00", tz=BERLIN)  # one window, two days on end
    assert one.closes_at(datetime(2026, 12, 7, 5, tzinfo=BERLIN)) == datetime(2026, 12, 9, tzinfo=BERLIN)


def test_windows_that_never_close_have_no_closing_time() -> None:
    now = datetime(2026, 12, 6, 5, 28, tzinfo=BERLIN)
    assert parse_window("daily 00:00-24:00", tz=BERLIN).closes_at(now) is None
    assert parse_windows(["daily 12:00-00:00", "daily 00:00-12:00"], tz=BERLIN).closes_at(now) is None


def test_a_naive_datetime_is_refused() -> None:
    with pytest.raises(ValueError, match="time zone-aware"):
        parse_window("Sat 01:00-05:00", tz=BERLIN).contains(datetime(2026, 12, 12, 2))
    with pytest.raises(ValueError, match="time zone-aware"):
        Windows().next_open(datetime(2026, 12, 12, 2))


def test_the_answer_does_not_depend_on_the_zone_the_question_is_asked_in() -> None:
    w = parse_window("Sat 01:00-05:00", tz=BERLIN)
    in_utc = utc(2026, 12, 12, 0, 30)  # 01:30 in Berlin
    in_tokyo = in_utc.astimezone(ZoneInfo("Asia/Tokyo"))
    assert w.contains(in_utc) and w.contains(in_tokyo)
    assert w.closes_at(in_tokyo) == datetime(2026, 12, 12, 5, tzinfo=BERLIN)


def test_times_come_back_in_utc_so_that_arithmetic_with_a_local_now_is_exact() -> None:
    w = parse_window("Sun 01:00-05:00", tz=BERLIN)
    now = datetime(2026, 3, 29, 1, 30, tzinfo=BERLIN)  # CET; the window closes at 05:00 CEST
    closes = w.closes_at(now)
    assert closes is not None and closes.tzinfo is UTC
    assert closes - now == timedelta(hours=2, minutes=30)  # wall clocks would say 3:30
    assert w.next_open(now + timedelta(hours=12)).tzinfo is UTC


# -- windows: daylight saving time (Europe/Berlin) ---------------------------------------------------------------

def test_a_window_over_the_spring_jump_is_an_hour_shorter_in_real_time() -> None:
    w = parse_window("Sun 01:00-05:00", tz=BERLIN)
    opens = w.next_open(SPRING - timedelta(hours=12))
    assert opens.astimezone(UTC) == utc(2026, 3, 29, 0)  # 01:00 CET
    closes = w.closes_at(opens)
    assert closes is not None and closes.astimezone(UTC) == utc(2026, 3, 29, 3)  # 05:00 CEST
    assert w.contains(utc(2026, 3, 29, 1, 30))  # 03:30 CEST


def test_a_window_over_the_autumn_fall_back_is_an_hour_longer_in_real_time() -> None:
    w = parse_window("Sun 01:00-05:00", tz=BERLIN)
    opens = w.next_open(AUTUMN - timedelta(hours=12))
    assert opens.astimezone(UTC) == utc(2026, 10, 24, 23)  # 01:00 CEST
    closes = w.closes_at(opens)
    assert closes is not None and closes.astimezone(UTC) == utc(2026, 10, 25, 4)  # 05:00 CET
    for minutes in range(0, 300, 10):
        assert w.contains(utc(2026, 10, 24, 23) + timedelta(minutes=minutes))


def test_a_start_the_clocks_skip_opens_the_window_at_the_jump() -> None:
    w = parse_window("Sun 02:30-04:00", tz=BERLIN)
    opens = w.next_open(SPRING - timedelta(hours=12))
    assert opens.astimezone(UTC) == utc(2026, 3, 29, 1)  # 03:00 CEST, the moment the clocks jump
    assert opens == datetime(2026, 3, 29, 3, tzinfo=BERLIN)
    assert not w.contains(utc(2026, 3, 29, 0, 59, 59))
    assert w.closes_at(opens) == datetime(2026, 3, 29, 4, tzinfo=BERLIN)


def test_an_end_the_clocks_skip_closes_the_window_at_the_jump() -> None:
    w = parse_window("Sun 01:30-02:30", tz=BERLIN)
    opens = w.next_open(SPRING - timedelta(hours=12))
    assert w.closes_at(opens) == datetime(2026, 3, 29, 3, tzinfo=BERLIN)
    assert not w.contains(datetime(2026, 3, 29, 3, 0, tzinfo=BERLIN))


def test_a_window_wholly_in_the_skipped_hour_does_not_open_that_day() -> None:
    w = parse_window("Sun 02:00-02:30", tz=BERLIN)
    assert w.next_open(SPRING - timedelta(hours=12)) == datetime(2026, 4, 5, 2, tzinfo=BERLIN)
    daily = parse_window("daily 02:10-02:20", tz=BERLIN)
    assert daily.next_open(SPRING + timedelta(hours=1)) == datetime(2026, 3, 30, 2, 10, tzinfo=BERLIN)


def test_a_window_inside_the_repeated_hour_opens_once_on_its_first_pass() -> None:
    w = parse_window("Sun 02:30-02:45", tz=BERLIN)
    opens = w.next_open(AUTUMN - timedelta(hours=12))
    assert opens.astimezone(UTC) == utc(2026, 10, 25, 0, 30)  # 02:30 CEST
    closes = w.closes_at(opens)
    assert closes is not None and closes.astimezone(UTC) == utc(2026, 10, 25, 0, 45)
    assert not w.contains(utc(2026, 10, 25, 1, 35))  # 02:35 CET, the second pass
    assert w.next_open(utc(2026, 10, 25, 1, 35)).astimezone(UTC) == utc(2026, 11, 1, 1, 30)  # 02:30 CET a week on


def test_a_daily_window_keeps_its_wall_clock_time_across_the_change() -> None:
    w = parse_window("daily 01:00-05:00", tz=BERLIN)
    before = w.next_open(datetime(2026, 3, 27, 12, tzinfo=BERLIN))
    after = w.next_open(datetime(2026, 3, 30, 12, tzinfo=BERLIN))
    assert (before.astimezone(BERLIN).hour, after.astimezone(BERLIN).hour) == (1, 1)
    assert before.hour == 0 and after.hour == 23  # in UTC: CET, then CEST


# -- windows: properties -----------------------------------------------------------------------------------------

ZONES = [BERLIN, ZoneInfo("UTC"), ZoneInfo("America/New_York"), ZoneInfo("Australia/Lord_Howe")]  # a 30-min shift


@st.composite
def window_texts(draw: st.DrawFn) -> str:
    days = draw(st.sampled_from(["daily", "*", "Sat", "Mon-Fri", "Fri-Mon", "Sat,Sun", "Tue,Thu", "Sun", "Wed"]))
    start = draw(st.integers(0, 1439))
    end = draw(st.integers(0, 1440).filter(lambda e: e != start))
    return f"{days} {start // 60:02d}:{start % 60:02d}-{end // 60:02d}:{end % 60:02d}"


moments = st.datetimes(min_value=datetime(2020, 1, 1), max_value=datetime(2035, 12, 31), timezones=st.just(UTC))


@settings(max_examples=300, deadline=None)
@given(st.lists(window_texts(), min_size=1, max_size=3), st.sampled_from(ZONES), moments)
def test_contains_next_open_and_closes_at_agree(texts: list[str], tz: ZoneInfo, t: datetime) -> None:
    ws = parse_windows(texts, tz=tz)
    if ws.contains(t):
        assert ws.next_open(t) == t
        end = ws.closes_at(t)
        if end is not None:
            assert end > t and not ws.contains(end)
            assert ws.contains(end - timedelta(microseconds=1))
            assert ws.contains(t + (end - t) / 2)
    else:
        assert ws.closes_at(t) is None
        nxt = ws.next_open(t)
        assert nxt > t and ws.contains(nxt)
        assert nxt - t < timedelta(days=15)  # a week, or two when one fell into a skipped hour
        for k in range(1, 8):  # closed all the way to the next opening
            assert not ws.contains(t + (nxt - t) * k / 8)
        assert not ws.contains(nxt - timedelta(microseconds=1))


@settings(max_examples=300, deadline=None)
@given(window_texts(), moments)
def test_without_clock_changes_a_window_is_its_weekday_and_time_of_day(text: str, t: datetime) -> None:
    """In UTC (no clock changes) the answer is the plain reading of the text."""
    w = parse_window(text, tz=UTC)
    minute = t.hour * 60 + t.minute + (t.second + t.microsecond / 1e6) / 60
    s, e = w.start_minute, w.end_minute
    if e > s:
        expected = t.weekday() in w.days and s <= minute < e
    else:
        expected = (t.weekday() in w.days and minute >= s) or ((t.weekday() - 1) % 7 in w.days and minute < e)
    assert w.contains(t) == expected


@settings(max_examples=200, deadline=None)
@given(window_texts(), st.datetimes(min_value=datetime(2020, 1, 1), max_value=datetime(2035, 12, 31),
                                     timezones=st.just(BERLIN), allow_imaginary=False))
def test_in_berlin_the_window_opens_when_the_clock_reads_its_start(text: str, t: datetime) -> None:
    w = parse_window(text, tz=BERLIN)
    nxt = w.next_open(t)
    if nxt is not t:
        local = nxt.astimezone(BERLIN)
        at_start = local.hour * 60 + local.minute == w.start_minute
        jumped = local.utcoffset() != (local - timedelta(hours=1)).utcoffset()  # opened at a jump (skipped start)
        assert at_start or jumped
        assert local.second == 0 and local.microsecond == 0


# -- the local zone ----------------------------------------------------------------------------------------------

def test_the_local_zone_follows_tz_and_keeps_dst_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "Europe/Berlin")
    assert local_timezone() is BERLIN
    monkeypatch.setenv("TZ", ":Europe/Berlin")
    assert local_timezone() is BERLIN
    monkeypatch.setenv("TZ", "/usr/share/zoneinfo/Europe/Berlin")
    tz = local_timezone()
    assert tz.utcoffset(datetime(2026, 1, 1)) == timedelta(hours=1)
    assert tz.utcoffset(datetime(2026, 7, 1)) == timedelta(hours=2)
    assert local_timezone() is tz  # one object per file: windows parsed twice compare equal
    monkeypatch.setenv("TZ", "")
    assert local_timezone().utcoffset(datetime(2026, 7, 1)) == timedelta(0)


def test_windows_default_to_the_local_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "Europe/Berlin")
    assert parse_window("Sat 01:00-05:00").tz is BERLIN
    assert parse_window("Sat 01:00-05:00") == parse_window("Sat 01:00-05:00")
    assert parse_crontab("0 2 * * *").timezone == BERLIN


def test_a_window_accepts_any_fixed_offset_zone() -> None:
    w = Window(days=frozenset({5}), start_minute=60, end_minute=300, tz=timezone(timedelta(hours=3)))
    assert w.contains(utc(2026, 12, 11, 22, 30))  # Saturday 01:30 at +03:00
    assert w.duration_s == 4 * 3600


# -- crontab -----------------------------------------------------------------------------------------------------

def next_fire(text: str, after: datetime) -> datetime:
    fire = parse_crontab(text, tz=BERLIN).get_next_fire_time(None, after)
    assert fire is not None
    return fire


MONDAY = datetime(2026, 12, 7, 12, tzinfo=BERLIN)


@pytest.mark.parametrize(("text", "weekdays"), [
    ("0 2 * * 0", {6}), ("0 2 * * 7", {6}), ("0 2 * * 1", {0}), ("0 2 * * 1-5", {0, 1, 2, 3, 4}),
    ("0 2 * * 6,0", {5, 6}), ("0 2 * * */2", {6, 1, 3, 5}), ("0 2 * * 1-5/2", {0, 2, 4}),
    ("0 2 * * 0-7", set(range(7))), ("0 2 * * sun", {6}), ("0 2 * * MON-FRI", {0, 1, 2, 3, 4}),
    ("0 2 * * *", set(range(7))), ("@weekly", {6}),
])
def test_crontab_weekdays_mean_what_they_mean_in_crontab(text: str, weekdays: set[int]) -> None:
    seen, t = set(), MONDAY
    for _ in range(14):
        t = next_fire(text, t + timedelta(seconds=1))
        seen.add(t.weekday())
    assert seen == weekdays


def test_a_crontab_schedule_fires_at_its_wall_clock_time_in_the_daemon_zone() -> None:
    assert next_fire("30 2 * * *", MONDAY) == datetime(2026, 12, 8, 2, 30, tzinfo=BERLIN)
    assert next_fire("*/15 * * * *", MONDAY) == MONDAY
    assert next_fire("@daily", MONDAY) == datetime(2026, 12, 8, tzinfo=BERLIN)
    assert next_fire("0 0 1 1 *", MONDAY) == datetime(2027, 1, 1, tzinfo=BERLIN)


@pytest.mark.parametrize(("text", "message"), [
    ("0 2 * *", "schedule '0 2 * *' needs 5 fields (minute hour day month weekday), it has 4"),
    ("0 2 * * * *", "schedule '0 2 * * * *' needs 5 fields (minute hour day month weekday), it has 6"),
    ("", "schedule '' needs 5 fields (minute hour day month weekday), it has 0"),
    ("@sometimes", "schedule '@sometimes' needs 5 fields (minute hour day month weekday), it has 1"),
    ("61 * * * *", "schedule '61 * * * *' has an invalid minute field '61' "
                   "(the last value (61) is higher than the maximum value (59))"),
    ("0 25 * * *", "schedule '0 25 * * *' has an invalid hour field '25' "
                   "(the last value (25) is higher than the maximum value (23))"),
    ("0 2 0 * *", "schedule '0 2 0 * *' has an invalid day field '0' "
                  "(the first value (0) is lower than the minimum value (1))"),
    ("0 2 * 13 *", "schedule '0 2 * 13 *' has an invalid month field '13' "
                   "(the last value (13) is higher than the maximum value (12))"),
    ("0 2 * * 8", "schedule '0 2 * * 8' has an invalid weekday field '8': use 0-7 (0 and 7 are Sunday) or "
                  "mon-fri, in increasing order"),
    ("0 2 * * 5-1", "schedule '0 2 * * 5-1' has an invalid weekday field '5-1': use 0-7 (0 and 7 are Sunday) or "
                    "mon-fri, in increasing order"),
    ("0 2 * * fri-mon", "schedule '0 2 * * fri-mon' has an invalid weekday field 'fri-mon' "
                        "(the minimum value in a range must not be higher than the maximum)"),
    ("0 2 ? * *", "schedule '0 2 ? * *' has an invalid day field '?' (unrecognized expression \"?\" for field "
                  "\"day\")"),
    ("0 2 1 * mon", "schedule '0 2 1 * mon' restricts both the day of the month and the weekday, which crontab "
                    "reads as either and tuner's scheduler as both: use '*' for one of them"),
    ("0 2 31 2 *", "schedule '0 2 31 2 *' never fires"),
])
def test_bad_crontab_lines_are_refused_with_one_sentence(text: str, message: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_crontab(text, tz=BERLIN)
    assert str(err.value) == message


def test_a_window_built_by_hand_is_checked_too() -> None:
    with pytest.raises(ValueError, match="days from 0"):
        Window(days=frozenset({7}), start_minute=60, end_minute=120, tz=UTC)
    with pytest.raises(ValueError, match="days from 0"):
        Window(days=frozenset(), start_minute=60, end_minute=120, tz=UTC)
    with pytest.raises(ValueError, match="from minute 1440 to minute 60"):
        Window(days=frozenset({1}), start_minute=1440, end_minute=60, tz=UTC)
    with pytest.raises(ValueError, match="from minute 60 to minute 60"):
        Window(days=frozenset({1}), start_minute=60, end_minute=60, tz=UTC)
