"""When the daemon's jobs run next and whether its schedule ever meets a window (``tuner daemon --check-config``):
pure logic on APScheduler's own cron triggers and tuner's windows, in a fixed zone."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tuner.daemon.upcoming import first_inside, lines, never_inside
from tuner.settings.schedule import parse_crontab, parse_windows

NOW = datetime(2026, 12, 6, 17, 0, tzinfo=UTC)  # a Sunday


def _cron(text: str):  # type: ignore[no-untyped-def]
    return parse_crontab(text, tz=UTC)


@pytest.mark.parametrize(("schedule", "windows", "first"), [
    ("0 2 * * 6", ["Sat 01:00-05:00"], datetime(2026, 12, 12, 2, 0, tzinfo=UTC)),
    ("* * * * *", ["Sat 01:00-05:00"], datetime(2026, 12, 12, 1, 0, tzinfo=UTC)),  # the window's first minute
    ("30 23 * * *", ["Fri 23:00-02:00"], datetime(2026, 12, 11, 23, 30, tzinfo=UTC)),  # past midnight
    ("0 2 1 * *", ["Mon 01:00-05:00"], datetime(2027, 2, 1, 2, 0, tzinfo=UTC)),  # the first 1st that is a Monday
    ("0 2 * * 6", [], datetime(2026, 12, 12, 2, 0, tzinfo=UTC)),  # no windows: always open
])
def test_the_first_fire_inside_a_window_is_found(schedule: str, windows: list[str], first: datetime) -> None:
    assert first_inside(_cron(schedule), parse_windows(windows, tz=UTC), NOW) == first


@pytest.mark.parametrize(("schedule", "windows"), [
    ("0 2 * * 6", ["Sun 01:00-05:00"]),  # Saturday 02:00 against a Sunday window
    ("0 6 * * *", ["daily 01:00-05:00"]),  # an hour after every window closes
    ("0 5 * * 6", ["Sat 01:00-05:00"]),  # at the very end: a window is open up to, not at, its end
])
def test_a_schedule_that_never_meets_a_window_gets_one_sentence(schedule: str, windows: list[str]) -> None:
    said = never_inside(schedule, _cron(schedule), parse_windows(windows, tz=UTC), NOW)
    assert said is not None and said.count(". ") == 0 and "never fires inside a maintenance window" in said
    assert schedule in said and "move the schedule into a window or widen the windows" in said


@pytest.mark.parametrize(("schedule", "windows"), [("0 2 * * 6", ["Sat 01:00-05:00"]), ("* * * * *", []),
                                                   (None, ["Sat 01:00-05:00"])])
def test_no_warning_when_the_schedule_meets_a_window_or_there_is_none(schedule: str | None,
                                                                       windows: list[str]) -> None:
    trigger = _cron(schedule) if schedule else None
    assert never_inside(schedule, trigger, parse_windows(windows, tz=UTC), NOW) is None


def test_each_job_says_when_it_runs_next() -> None:
    out = lines("0 2 * * 5", _cron("0 2 * * 5"), parse_windows(["Sat 01:00-05:00"], tz=UTC), "10m", "7d",
                7 * 86400.0, NOW)
    session, drift, reval = out
    assert session.startswith("next session: Fri 2026-12-11 02:00")
    assert "outside every window" in session  # Friday's run never meets Saturday's window
    assert drift == "next drift check: at start, then every 10m"
    assert reval.startswith("next re-validation check: Sun 2026-12-06 18:00") and "hourly" in reval
    out = lines("0 4 * * *", _cron("0 4 * * *"), parse_windows(["Sat 01:00-05:00"], tz=UTC), "10m", "7d",
                7 * 86400.0, NOW)
    assert "outside every window: it waits until Sat 2026-12-12 01:00" in out[0]  # Monday's; Saturday's is inside
    assert lines(None, None, parse_windows([], tz=UTC), "10m", "30m", 1800.0, NOW)[0].startswith(
        "next session: none scheduled")


def test_check_config_prints_the_next_runs_and_warns_on_stderr(tmp_path: Path) -> None:
    (tmp_path / "tuner.toml").write_text(
        f'[target]\ndsn = "host=/nowhere dbname=app"\n[tuner]\nstate_dir = "{tmp_path / "s"}"\n'
        '[daemon]\nschedule = "0 2 * * 6"\nwindows = ["Sun 01:00-05:00"]\n')
    proc = subprocess.run([sys.executable, "-m", "tuner", "daemon", "--check-config", "--config",
                           str(tmp_path / "tuner.toml")], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env={**os.environ, "TZ": "UTC"})
    assert proc.returncode == 0, proc.stderr
    assert "  next session: Sat " in proc.stdout and "  next drift check: at start" in proc.stdout
    warning = [ln for ln in proc.stderr.splitlines() if ln.startswith("tuner: warning: ")]
    assert len(warning) == 1 and "'0 2 * * 6' never fires inside a maintenance window" in warning[0]


def test_without_windows_a_scheduled_session_runs_when_it_fires_not_at_once() -> None:
    [session, *_] = lines("3 6 * * *", _cron("3 6 * * *"), parse_windows([], tz=UTC), "10m", "7d", 7 * 86400.0, NOW)
    assert session.startswith("next session: Mon 2026-12-07 06:03")
    assert "at once" not in session and "runs when the schedule fires" in session
