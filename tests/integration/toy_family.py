"""A fourth knob family, written the way a contributor would add one: this module plus one registry line.

It searches ``work_mem`` for an in-memory sort, with real probes: each probe opens a connection to the target,
``SET work_mem``, and times the sort with ``EXPLAIN ANALYZE``. Nothing persistent changes, so it runs on a
hot standby.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any, ClassVar, Literal

from tuner.core.decide import decide, recommendation
from tuner.core.session import build_optimiser, search
from tuner.families.base import FamilyContext, FamilyResult, Needs
from tuner.model import FamilyOutcome, Trial
from tuner.optimiser import Dimension

KNOB = "work_mem"
SORT = "SELECT g FROM generate_series(1, 300000) AS g ORDER BY (g::bigint * 7919) % 300007"


class Toy:
    name: ClassVar[str] = "toy"
    needs: ClassVar[Needs] = Needs()
    after: ClassVar[tuple[str, ...]] = ("concurrency",)
    summary: ClassVar[str] = "work_mem for one in-memory sort (a test family)"

    def applicable(self, ctx: FamilyContext) -> str | None:
        return None  # every server has work_mem, and SET needs no privilege

    async def run(self, ctx: FamilyContext) -> FamilyResult:
        async def probe(config: dict[str, Any], *, phase: Literal["search", "confirm"] = "search",
                        arm: Literal["baseline", "candidate"] | None = None) -> Trial:
            started, t0 = datetime.now(UTC), time.monotonic()
            async with ctx.connection() as conn:
                await conn.execute(f"SET work_mem = '{int(config[KNOB])}kB'")
                plan = json.loads(await conn.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) {SORT}"))
            ms = float(plan[0]["Execution Time"])
            return Trial(config=dict(config), value=ms, status="ok", phase=phase, arm=arm, started_at=started,
                         duration_s=round(time.monotonic() - t0, 3))

        async with ctx.connection() as conn:
            today_kb = int(await conn.fetchval("SELECT setting FROM pg_settings WHERE name = $1", KNOB))
            source = await conn.fetchval("SELECT source FROM pg_settings WHERE name = $1", KNOB)
        current = {KNOB: today_kb}
        optimiser = build_optimiser(ctx.policy, [Dimension(KNOB, 64, 65536)], current, seed=ctx.cfg.tuner.seed,
                                    budget=ctx.budget or 5)
        found = await search(optimiser, probe, max_consecutive_failures=3, progress=ctx.progress)
        assert found.recommendation is not None
        decided = await decide(current, found.recommendation.config, probe, ctx.policy,
                               near_optimal=found.recommendation.near_optimal, progress=ctx.progress)
        rec = recommendation(KNOB, decided, source=source, requires="reload")
        return FamilyResult(FamilyOutcome(family=self.name, status="done", reason="sorted", optimiser=optimiser.kind),
                            trials=[*found.trials, *decided.trials], recommendations=[rec])
