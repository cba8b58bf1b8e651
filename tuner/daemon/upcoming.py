"""When the daemon's jobs run next, and whether its schedule ever meets a maintenance window — for
``tuner daemon --check-config`` and the daemon's start.

A scheduled session is queued when the crontab fires and runs only inside a window: a schedule that never fires
inside one is not an error (each session waits for the next window), but it is rarely what was meant, so it is said
in one sentence. The jobs are those :meth:`tuner.daemon.service.Daemon._schedule` adds: the session on the crontab,
the drift check at start and then every ``drift_check_every``, and the re-validation check every
``revalidate_every`` or hourly, whichever is shorter.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from tuner.settings.schedule import Windows, local_timezone

HORIZON = timedelta(days=400)  # over a year: a yearly crontab fires at least once, against weekly windows
MAX_STEPS = 2000  # each step passes at least one window's opening: ~50 a year per weekly window


def first_inside(trigger: Any, windows: Windows, now: datetime, *, horizon: timedelta = HORIZON) -> datetime | None:
    """The first time at or after ``now`` (aware) at which ``trigger`` (APScheduler's) fires inside ``windows``;
    None when it does not within ``horizon``. Walks from fire time to the next window opening and back, so a
    schedule that fires every minute costs as little as a weekly one."""
    t, end = now, now + horizon
    for _ in range(MAX_STEPS):
        fire = trigger.get_next_fire_time(None, t)
        if fire is None or fire > end:
            return None
        if windows.contains(fire):
            return fire  # type: ignore[no-any-return]
        t = max(windows.next_open(fire), fire + timedelta(seconds=1))
    return None


def _when(dt: datetime) -> str:
    return dt.astimezone(local_timezone()).strftime("%a %Y-%m-%d %H:%M %Z").strip()


def lines(schedule: str | None, trigger: Any | None, windows: Windows, drift_every: str, revalidate_every: str,
          revalidate_s: float, now: datetime) -> list[str]:
    """What each job does next, one line each (local time)."""
    out = []
    if trigger is None:
        out.append("next session: none scheduled ([daemon] schedule is empty; POST /v1/sessions runs one)")
    else:
        fire = trigger.get_next_fire_time(None, now)
        inside = first_inside(trigger, windows, now)
        if windows.always_open:
            where = "no maintenance windows: it runs when the schedule fires"
        elif inside == fire:
            where = f"inside the window {windows}"
        elif inside is not None:
            where = f"outside every window: it waits until {_when(windows.next_open(fire))}"
        else:
            where = "outside every window, as every time it fires"
        out.append(f"next session: {_when(fire)} (schedule {schedule!r}; {where})")
    out.append(f"next drift check: at start, then every {drift_every}")
    check_every = min(revalidate_s, 3600.0)
    out.append(f"next re-validation check: {_when(now + timedelta(seconds=check_every))} if started now, then "
               f"{'hourly' if check_every == 3600.0 else f'every {revalidate_every}'} (one is due {revalidate_every} "
               "after the last)")
    return out


def never_inside(schedule: str | None, trigger: Any | None, windows: Windows, now: datetime) -> str | None:
    """One sentence when the schedule never fires inside a window within :data:`HORIZON`, else None."""
    if trigger is None or windows.always_open or first_inside(trigger, windows, now) is not None:
        return None
    return (f"the schedule {schedule!r} never fires inside a maintenance window ({windows}) in the coming year, so "
            "every session it queues waits for the next window to open: move the schedule into a window or widen "
            "the windows")
