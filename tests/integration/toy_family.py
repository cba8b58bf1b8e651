"""A fourth knob family, written the way a contributor would add one: this module plus one registry line.

It searches ``work_mem`` for an in-memory sort, with real probes: each probe opens a connection to the target,
``SET work_mem``, and times the sort with ``EXPLAIN ANALYZE``. Nothing persistent changes, so it runs on a
hot standby. It owns a policy table (``[toy] rows``, the rows it sorts) and a report section (``toy_rows_sorted``,
a top-level key of the JSON report), and tunes through the one tuning step every family uses.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any, ClassVar, Literal

from pydantic import Field

from tuner.settings.config import Section
from tuner.core.decide import recommendation
from tuner.core.tune import tune
from tuner.families.base import Family, FamilyContext, FamilyResult, Needs
from tuner.report.model import FamilyOutcome, ReportSection, Trial
from tuner.optimiser import Dimension

KNOB = "work_mem"
SORT = "SELECT g FROM generate_series(1, {rows}) AS g ORDER BY (g::bigint * 7919) % 300007"


class ToyPolicy(Section):
    rows: int = Field(default=300000, ge=1000, le=10_000_000, description="rows of the sort each probe times")


class ToyReport(ReportSection):
    toy_rows_sorted: int | None = None

    def table(self) -> list[Any]:
        return [] if self.toy_rows_sorted is None else [f"toy: sorted {self.toy_rows_sorted} rows per probe"]


class Toy(Family):
    name: ClassVar[str] = "toy"
    needs: ClassVar[Needs] = Needs()
    after: ClassVar[tuple[str, ...]] = ("concurrency",)
    summary: ClassVar[str] = "work_mem for one in-memory sort (a test family)"
    policy_section: ClassVar[type[ToyPolicy]] = ToyPolicy
    report_section: ClassVar[type[ToyReport]] = ToyReport

    def applicable(self, ctx: FamilyContext) -> str | None:
        return None  # every server has work_mem, and SET needs no privilege

    async def run(self, ctx: FamilyContext) -> FamilyResult:
        rows = ctx.policy.section(self.name).rows
        sort = SORT.format(rows=rows)

        async def probe(config: dict[str, Any], *, phase: Literal["search", "confirm"] = "search",
                        arm: Literal["baseline", "candidate"] | None = None) -> Trial:
            started, t0 = datetime.now(UTC), time.monotonic()
            async with ctx.connection() as conn:
                await conn.execute(f"SET work_mem = '{int(config[KNOB])}kB'")
                plan = json.loads(await conn.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) {sort}"))
            ms = float(plan[0]["Execution Time"])
            return Trial(config=dict(config), value=ms, status="ok", phase=phase, arm=arm, started_at=started,
                         duration_s=round(time.monotonic() - t0, 3))

        async with ctx.connection() as conn:
            today_kb = int(await conn.fetchval("SELECT setting FROM pg_settings WHERE name = $1", KNOB))
            source = await conn.fetchval("SELECT source FROM pg_settings WHERE name = $1", KNOB)
        current = {KNOB: today_kb}
        tuned = await tune(ctx, self.name, probe, [Dimension(KNOB, 64, 65536)], current)
        assert tuned.decided is not None
        rec = recommendation(KNOB, tuned.decided, source=source, requires="reload")
        return FamilyResult(FamilyOutcome(family=self.name, status="done", reason="sorted", optimiser=tuned.optimiser),
                            trials=tuned.trials, recommendations=[rec], section=ToyReport(toy_rows_sorted=rows))
