"""The concurrency family: ``effective_io_concurrency`` by ``SET`` in the probe session — nothing persistent
changes — over cold-cache sparse bitmap heap scans planned from the target's own statistics. Fine on a hot
standby. Runs after readahead, so it measures at today's readahead: the one its recommendation will run with.
"""

from __future__ import annotations

from typing import ClassVar

from tuner.core import space
from tuner.core.decide import decide, recommendation
from tuner.core.session import build_optimiser, search
from tuner.errors import ProbeError
from tuner.families.base import FamilyContext, FamilyResult, Needs, skipped, warm_note
from tuner.log import get_logger
from tuner.model import FamilyOutcome
from tuner.probes import workload
from tuner.probes.cache import CacheControl, choose_os_method
from tuner.probes.runner import ColdProbe

log = get_logger("tuner.concurrency")

KNOB = "effective_io_concurrency"


class Concurrency:
    name: ClassVar[str] = "concurrency"
    needs: ClassVar[Needs] = Needs(local_host=True)
    after: ClassVar[tuple[str, ...]] = ("readahead",)
    summary: ClassVar[str] = "effective_io_concurrency by SET in the probe session, over sparse bitmap heap scans"

    def applicable(self, ctx: FamilyContext) -> str | None:
        dim = space.dimension(KNOB, ctx.policy, ctx.facts)
        return dim if isinstance(dim, str) else None

    async def run(self, ctx: FamilyContext) -> FamilyResult:
        facts, policy = ctx.facts, ctx.policy
        ignored = sorted(k for k in policy.search
                         if k != KNOB and (s := space.spec(k, facts)) is not None and s.family == self.name)
        if ignored:
            log.warning("plan.knobs_not_probed", knobs=ignored, reason="no workload for them in this family yet")
        local = facts.local_data_directory()
        assert local is not None  # applicable() checked it
        async with ctx.connection() as conn:
            try:
                queries = await workload.plan(conn, custom=ctx.cfg.workload.queries,
                                              relations=ctx.cfg.workload.relations,
                                              pages_fraction=ctx.cfg.workload.pages_fraction)
            except ProbeError as exc:
                return skipped(self.name, f"{exc} ({exc.hint})" if exc.hint else str(exc))
            files = [f for q in queries if q.relation for f in await workload.relation_files(conn, local, q.relation)]
        workload_sql = [q.sql for q in queries]
        os_method = choose_os_method(local, files)
        if os_method == "none":
            return FamilyResult(FamilyOutcome(
                family=self.name, status="skipped", workload=workload_sql,
                reason="cannot empty the OS page cache: run tuner as root, or as a user who can read the relation files"))
        cache = await CacheControl.plan(facts, [q.relation for q in queries], connector=ctx.target.connect,
                                        restart=ctx.target.restart, os_method=os_method, files=files)
        probe = ColdProbe(
            dsn=ctx.target.dsn, queries=queries, cache=cache,
            statement_timeout_s=policy.guardrails.statement_timeout_s,
            min_cold_read_fraction=policy.cache.min_cold_read_fraction,
            require_bitmap=facts.server_version_num < 180000 or any(q.plan == "bitmap" for q in queries),
            connect_timeout_s=ctx.cfg.target.connect_timeout_s, connector=ctx.target.connect, precheck=ctx.target.check,
        )
        dim = space.dimension(KNOB, policy, facts)
        assert not isinstance(dim, str)  # applicable() checked it
        today = space.today(KNOB, facts)
        current = {KNOB: int(today.value)}
        pin = ctx.pins.get(self.name)
        if pin is not None:  # the daemon's re-validation: the stored recommendation against today, no search
            before, candidate = pin.against(current)
            decided = await decide(before, candidate, probe, policy, near_optimal=pin.near_optimal,
                                   progress=ctx.progress)
            rec = recommendation(KNOB, decided, source=today.source, requires=space.spec(KNOB, facts).requires)  # type: ignore[union-attr]
            return FamilyResult(FamilyOutcome(family=self.name, status="done", reason=pin.note(), workload=workload_sql,
                                              cache=cache.describe()),
                                trials=list(decided.trials), recommendations=[rec])
        budget = ctx.budget if ctx.budget is not None else policy.budget.probes
        # A warm start: the latest stored session on a matching target, re-measured at today's value and its
        # winner first (absolute times drift), instead of the policy's cold initial design.
        prior = await ctx.history.prior(self.name) if ctx.history else None
        warm = prior.for_knobs([KNOB]) if prior is not None else {}
        # The same construction the optimiser benchmark measures (benchmarks/optimiser.py).
        optimiser = build_optimiser(policy, [dim], current, seed=ctx.cfg.tuner.seed, budget=budget, **warm)
        log.info("plan", family=self.name, knob=KNOB, range=[dim.low, dim.high], current=current[KNOB],
                 queries=[q.name for q in queries], cache=cache.describe(), budget=budget)
        found = await search(optimiser, probe, max_consecutive_failures=policy.guardrails.max_failed_probes,
                             progress=ctx.progress)
        outcome = dict(family=self.name, workload=workload_sql, stop_reason=found.stop_reason,
                       optimiser=optimiser.kind, cache=cache.describe(),
                       warm_start=warm_note(prior, optimiser))
        if found.recommendation is None:
            return FamilyResult(FamilyOutcome(status="failed", reason=found.stop_reason, **outcome),  # type: ignore[arg-type]
                                trials=list(found.trials))
        best = found.recommendation
        decided = await decide(current, {KNOB: best.config[KNOB]}, probe, policy, near_optimal=best.near_optimal,
                               progress=ctx.progress)
        rec = recommendation(KNOB, decided, source=today.source, requires=space.spec(KNOB, facts).requires)  # type: ignore[union-attr]
        reason = "search and confirmation finished" if decided.trials else "search finished"
        return FamilyResult(FamilyOutcome(status="done", reason=reason, **outcome),  # type: ignore[arg-type]
                            trials=[*found.trials, *decided.trials], recommendations=[rec])
