"""One tuner session on a fresh sandbox with an emulated device, running a benchmark-only family (the truth
sweeps of benchmarks/devices.py and devices_2d.py) through the same runner as the shipped families: its journal,
its sandbox, its device stack and their teardown."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

from tuner.configured import load_config
from tuner.families import REGISTRY
from tuner.model import Report
from tuner.policy import load_policy

STATE_ROOT = "/var/lib/tuner-bench"


def load() -> float:
    """The machine's 1-minute load average (other engineers' tests share it): recorded with every result."""
    return round(os.getloadavg()[0], 2)


def state_dir(profile: str, part: str) -> str:
    """A journal of each profile's own, so profiles can be measured side by side: a journal admits one tuner at a
    time, and each of these sessions changes only its own sandbox (its loop device, its servers)."""
    path = Path(STATE_ROOT) / f"{profile.replace('=', '-').replace(',', '+')}.{part}"
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return str(path)


def in_sandbox(family: Any, profile: str, scale: int, part: str, *, pg_version: int | None = None) -> tuple[Report, dict[str, Any]]:
    """Run ``family`` (a class, registered for this call only) on a sandbox with ``profile``; the report and the
    run's wall time and load average before and after."""
    from tuner.runner import recommend  # heavy: the whole session machinery

    env = {"TUNER_SANDBOX__DEVICE": profile, "TUNER_SANDBOX__SCALE": str(scale),
           "TUNER_TUNER__STATE_DIR": state_dir(profile, part)}
    if pg_version is not None:
        env["TUNER_SANDBOX__PG_VERSION"] = str(pg_version)
    cfg = load_config(None, environ=env)
    policy = load_policy("default")
    t0, load0 = time.monotonic(), load()
    REGISTRY.register(family)
    try:
        report = asyncio.run(recommend(cfg, policy, use_sandbox=True, families=(family.name,), store=None,
                                       warm_start=False))
    finally:
        REGISTRY.unregister(family.name)
    return report, {"wall_s": round(time.monotonic() - t0, 1), "load": [load0, load()],
                    "server_version_num": report.target.server_version_num, "min_effect": policy.decision.min_effect}
