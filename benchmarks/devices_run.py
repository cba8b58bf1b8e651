"""One tuner session on a fresh sandbox with an emulated device, running a benchmark-only family (the truth
sweeps of benchmarks/devices.py and devices_2d.py) through the same runner as the shipped families: its journal,
its sandbox, its device stack and their teardown."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from tuner.configured import load_config
from tuner.families import REGISTRY
from tuner.model import Report
from tuner.policy import load_policy


def load() -> float:
    """The machine's 1-minute load average (other engineers' tests share it): recorded with every result."""
    return round(os.getloadavg()[0], 2)


def in_sandbox(family: Any, profile: str, scale: int, *, pg_version: int | None = None) -> tuple[Report, dict[str, Any]]:
    """Run ``family`` (a class, registered for this call only) on a sandbox with ``profile``; the report and the
    run's wall time and load average before and after."""
    from tuner.runner import recommend  # heavy: the whole session machinery

    env = {"TUNER_SANDBOX__DEVICE": profile, "TUNER_SANDBOX__SCALE": str(scale)}
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
