"""The concurrency family: how many reads PostgreSQL keeps in flight, and how they are issued — over cold-cache
scans planned from the target's own statistics. Runs after readahead, so it measures at today's readahead: the
one its recommendation will run with.

Per version (PostgreSQL 17 and 18 release notes; 18's docs on asynchronous I/O, Resource Consumption):

* **up to 16**: ``effective_io_concurrency`` by ``SET`` in the probe session — nothing persistent changes — over
  sparse bitmap heap scans, the only scans it acts on. Fine on a hot standby.
* **17+**: read streams serve sequential scans too. ``io_combine_limit`` (17+, ``SET``) sizes their reads and is
  searched jointly with ``effective_io_concurrency``, which from 18 also sets their look-ahead; the workload adds a
  cold sequential scan of the largest table, and the objective is the policy's weighted sum of the two scan kinds'
  times (``[concurrency]``). Every knob's decision carries an interval: a knob whose value the search kept is
  confirmed against the best other value it measured.
* **18+**: ``io_workers`` (reload) is searched under ``io_method = worker`` at the values found above, and
  ``io_method`` (restart) is screened against today's where :mod:`tuner.families.aio` allows it (io_uring only where
  nothing stops it: :mod:`tuner.hostfacts.iouring`): ALTER SYSTEM, journaled first and put back at the end.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

from tuner.core import bounds
from tuner.core.decide import Decision, decide, recommendation
from tuner.core.loops import Probe
from tuner.core.tune import Tuned, tune
from tuner.errors import ProbeError
from tuner.families import aio, concurrency_figures, concurrency_sections, plans
from tuner.families.base import Family, FamilyContext, FamilyResult, Needs, skipped
from tuner.families.handover import Fixed, from_finding, settled_value
from tuner.log import get_logger
from tuner.report.model import FamilyOutcome, Recommendation, Trial
from tuner.report.near import NearOptimal
from tuner.optimiser import Dimension
from tuner.settings.policy import Policy
from tuner.probes import workload
from tuner.probes.cache import CacheControl, choose_os_method
from tuner.probes.coldprobe import ColdProbe, SystemKnobs

log = get_logger("tuner.concurrency")

KNOB = "effective_io_concurrency"
ICL = "io_combine_limit"
ICL_CAP = "io_max_combine_limit"
WORKERS = "io_workers"
METHOD = "io_method"
READ_STREAMS = 170000  # sequential scans go through read streams from 17
WEIGHTED = "weighted_execution_time_ms"


class Concurrency(Family):
    name: ClassVar[str] = "concurrency"
    reads_workload: ClassVar[bool] = True
    needs: ClassVar[Needs] = Needs(local_host=True)
    after: ClassVar[tuple[str, ...]] = ("readahead",)
    summary: ClassVar[str] = "effective_io_concurrency (SET) over cold scans; 17+ io_combine_limit; 18+ io_workers, io_method"
    honours_pins: ClassVar[bool] = True  # a stored effective_io_concurrency is re-validated by pinning it
    html_sections = staticmethod(concurrency_figures.html_sections)
    policy_section: ClassVar[type[concurrency_sections.Policy]] = concurrency_sections.Policy

    def applicable(self, ctx: FamilyContext) -> str | None:
        dim = bounds.dimension(KNOB, ctx.policy, ctx.facts)
        return dim if isinstance(dim, str) else None

    async def preflight(self, ctx: FamilyContext) -> plans.FamilyPlan:  # what `tuner check` shows; changes nothing
        return await plans.scans(ctx, self.name, with_seq_scan if ctx.facts.server_version_num >= READ_STREAMS else None)

    async def run(self, ctx: FamilyContext) -> FamilyResult:
        facts, policy = ctx.facts, ctx.policy
        streams = facts.server_version_num >= READ_STREAMS
        finding = ctx.findings.get(KNOB) if self.name not in ctx.pins else None
        if finding is not None and not streams:
            # The read path was searched as one (readahead x effective_io_concurrency) and its combination
            # confirmed: the owner recommends from that evidence; searching again here, on a workload of its own
            # at today's readahead, would re-pick the value off the combination (issue #53).
            rec = from_finding(finding, facts)
            return FamilyResult(FamilyOutcome(
                family=self.name, status="done",
                reason=f"{KNOB} searched and confirmed with {finding.where} by the {finding.by} family "
                       "(the read path as one search); nothing more to probe here"), recommendations=[rec])
        local = facts.local_data_directory()
        assert local is not None  # applicable() checked it
        io: dict[str, dict[str, Any]] = {}
        async with ctx.connection() as conn:
            try:
                queries = await plans.read_path_queries(ctx, conn)
            except ProbeError as exc:
                return skipped(self.name, f"{exc} ({exc.hint})" if exc.hint else str(exc))
            if streams:
                io = await aio.io_settings(conn)
                queries = await with_seq_scan(conn, ctx, queries)
            files = [f for q in queries if q.relation for f in await workload.relation_files(conn, local, q.relation)]
        workload_sql = [q.as_run for q in queries]
        os_method = choose_os_method(local, files)
        if os_method == "none":
            return FamilyResult(FamilyOutcome(
                family=self.name, status="skipped", workload=workload_sql,
                reason="cannot empty the OS page cache: run tuner as root, or as a user who can read the relation files"))
        # Shared buffers: evicted (17+ with pg_buffercache), else restarted, else not emptied (warned).
        cache = await CacheControl.plan(facts, [q.relation for q in queries], connector=ctx.target.connect,
                                        restart=ctx.target.restart, os_method=os_method, files=files)
        if streams:
            return await _read_streams(self.name, ctx, queries, cache, io, local)
        ignored = sorted(k for k in policy.search
                         if k != KNOB and (s := bounds.spec(k, facts)) is not None and s.family == self.name)
        if ignored:
            log.warning("plan.knobs_not_probed", knobs=ignored, reason="no workload for them in this family yet")
        probe = cold_probe(ctx, queries, cache)
        dim = bounds.dimension(KNOB, policy, facts)
        assert not isinstance(dim, str)  # applicable() checked it
        today = bounds.today(KNOB, facts)
        current = {KNOB: int(today.value)}
        if self.name not in ctx.pins:
            log.info("plan", family=self.name, knob=KNOB, range=[dim.low, dim.high], current=current[KNOB],
                     queries=[q.name for q in queries], cache=cache.describe(),
                     budget=ctx.budget if ctx.budget is not None else policy.budget.probes)
        tuned = await tune(ctx, self.name, probe, [dim], current)
        outcome: dict[str, Any] = dict(family=self.name, workload=workload_sql, cache=cache.describe(),
                                       statements=plans.statement_lines(queries))
        if tuned.pinned:  # the daemon's re-validation: the stored recommendation against today, no search
            outcome.update(reason=tuned.warm_start)
        else:
            outcome.update(stop_reason=tuned.stop_reason, optimiser=tuned.optimiser, warm_start=tuned.warm_start)
        if tuned.decided is None:
            reason = tuned.stop_reason or "the search found nothing to recommend"
            return FamilyResult(FamilyOutcome(status="failed", reason=reason, **outcome),
                                trials=tuned.trials)
        if not tuned.pinned:
            outcome["reason"] = "search and confirmation finished" if tuned.decided.trials else "search finished"
        rec = recommendation(KNOB, tuned.decided, source=today.source, requires=bounds.spec(KNOB, facts).requires)  # type: ignore[union-attr]
        return FamilyResult(FamilyOutcome(status="done", **outcome), trials=tuned.trials,
                            recommendations=[rec])


def cold_probe(ctx: FamilyContext, queries: list[workload.ProbeQuery], cache: CacheControl,
           system: SystemKnobs | None = None) -> ColdProbe:
    """The family's cold probe over ``queries`` (public: the device benchmarks measure with it, so a sweep measures
    what a session measures): each probe empties the caches as ``cache`` says, sets the session knobs by ``SET``
    (and ``system``'s by ALTER SYSTEM, journaled) and reads the server's own execution times."""
    facts = ctx.facts
    return ColdProbe(
        dsn=ctx.target.dsn, queries=queries, cache=cache,
        statement_timeout_s=ctx.policy.guardrails.statement_timeout_s,
        min_cold_read_fraction=ctx.policy.cache.min_cold_read_fraction,
        # Statements of pg_stat_statements were chosen for plans with the scans the knobs act on: from 17 a
        # sequential scan alone is one.
        require_bitmap=(facts.server_version_num < 180000 or any(q.plan == "bitmap" for q in queries))
        and not (facts.server_version_num >= READ_STREAMS and any(q.kind == "statement" for q in queries)),
        connect_timeout_s=ctx.cfg.target.connect_timeout_s, connector=ctx.target.connect, precheck=ctx.target.check,
        block_size=int(facts.settings["block_size"].setting) if "block_size" in facts.settings else 8192,
        system=system,
        # A sequential scan and a bitmap scan of one table: each needs a cache emptied for it. So does each of the
        # operator's statements: each one's own cold time is measured (two of them often read the same table).
        cold_per_query=len(queries) > 1 and any(q.plan == "seq" or q.kind == "statement" for q in queries),
        server_version_num=facts.server_version_num, disk=ctx.disk,
    )


async def with_seq_scan(conn: Any, ctx: FamilyContext, queries: list[workload.ProbeQuery]) -> list[workload.ProbeQuery]:
    """17+: the generated bitmap scans and a cold sequential scan of the largest table, each with the policy's
    weight — where a knob the family searches here acts on sequential scans. Custom queries and the statements of
    pg_stat_statements are the workload as they are."""
    mix = ctx.policy.read_path  # the read path's one workload
    if plans.own_workload(ctx):
        return queries
    searched = [k for k in (KNOB, ICL) if not isinstance(bounds.dimension(k, ctx.policy, ctx.facts), str)]
    if not workload.seq_scan_knobs(ctx.facts.server_version_num, searched) or mix.seq_scan_weight == 0:
        return queries
    # A tablespace's own effective_io_concurrency wins over SET: its tables would not vary with the probe.
    own = [ts.name for ts in ctx.facts.tablespaces if any(o.startswith(f"{KNOB}=") for o in ts.options)]
    table = await workload.largest_table(conn, skip_tablespaces=own)
    if table is None:
        return queries
    seq = replace(workload.seq_query(table[0]), weight=mix.seq_scan_weight)
    bitmap = [replace(q, weight=mix.bitmap_scan_weight) for q in queries] if mix.bitmap_scan_weight > 0 else []
    return [*bitmap, seq]


@dataclass
class _Stage:
    """What one step of the 17+ path adds to the family's result."""

    trials: list[Trial]
    recommendations: list[Recommendation]
    chosen: dict[str, Any]  # the values the next step measures at: recommended where confirmed, else today's
    notes: list[str]
    stop_reason: str | None = None  # the search's
    warm_start: str | None = None
    pinned: Tuned | None = None  # the daemon's re-validation ran instead (no search): its tuning step


async def _read_streams(name: str, ctx: FamilyContext, queries: list[workload.ProbeQuery], cache: CacheControl,
                        io: dict[str, dict[str, Any]], local: Path) -> FamilyResult:
    """17+: effective_io_concurrency (× io_combine_limit) over both scan kinds; 18+: io_workers and io_method."""
    facts, policy = ctx.facts, ctx.policy
    weighted = any(q.plan == "seq" for q in queries) and any(q.plan != "seq" for q in queries)
    metric = WEIGHTED if weighted else "execution_time_ms"
    notes: list[str] = []
    dims: list[Dimension] = []
    current: dict[str, Any] = {}
    finding = ctx.findings.get(KNOB) if name not in ctx.pins else None
    handed: dict[str, Any] = {}  # knobs the read path's search settled, measured at here (not searched again)
    if finding is not None:
        handed[KNOB] = settled_value(from_finding(finding, facts))
    for knob in (KNOB, ICL):
        if knob in handed:
            continue
        dim = _icl_dimension(policy, ctx, io) if knob == ICL else bounds.dimension(knob, policy, facts)
        if isinstance(dim, str):
            if knob == ICL and bounds.spec(ICL, facts) is not None:
                notes.append(f"{ICL} not searched: {dim}")
            continue
        if knob == ICL and dim.high < (bounds.spec(ICL, facts).max or dim.high):  # type: ignore[union-attr]
            notes.append(f"{ICL} searched in {dim.low}..{dim.high}: {ICL_CAP} = {io[ICL_CAP]['setting']} caps it "
                         "(a restart-level setting tuner does not change)")
        dims.append(dim)
        current[knob] = dim.snap(int(bounds.today(knob, facts).value))
    why_no_alter = aio.alter_system_refusal(ctx)
    workers_dim = aio.workers_dimension(ctx, io, why_no_alter, notes)
    methods = aio.method_alternatives(ctx, io, why_no_alter, notes)
    system = None
    if workers_dim is not None or methods:
        port = await server_port(ctx)
        system = SystemKnobs(
            journal=ctx.journal, contexts={k: io[k]["context"] for k in (WORKERS, aio.POOL_MAX, METHOD) if k in io},
            connector=ctx.target.connect, restart=ctx.target.restart, dsn=ctx.target.dsn,
            identity={"system_identifier": facts.system_identifier, "port": port, "sandbox_dir": ctx.sandbox_dir},
            data_directory=local)
    probe: Probe = cold_probe(ctx, queries, cache, system)
    if handed:
        probe = Fixed(probe, handed)
    workload_sql = [q.as_run for q in queries]
    ignored = sorted(k for k in policy.search if k not in (KNOB, ICL, WORKERS, aio.POOL_MAX, METHOD)
                     and (s := bounds.spec(k, facts)) is not None and s.family == name)
    if ignored:
        log.warning("plan.knobs_not_probed", knobs=ignored, reason="no workload for them in this family yet")
    log.info("plan", family=name, knobs={d.name: [d.low, d.high] for d in dims}, current=current,
             queries=[f"{q.name} (weight {q.weight:g})" for q in queries], cache=cache.describe(),
             io_workers=None if workers_dim is None else [workers_dim.low, workers_dim.high], io_method=methods,
             notes=notes)
    trials: list[Trial] = []
    recs: list[Recommendation] = []
    restored: list[str] = []
    outcome: dict[str, Any] = dict(family=name, workload=workload_sql, optimiser="bayesian", cache=cache.describe(),
                                   statements=plans.statement_lines(queries))
    try:
        pinned = dict(current)  # a pin re-validates io_workers too, at today's value
        if workers_dim is not None:
            pinned[workers_dim.name] = int(io[workers_dim.name]["setting"])
        if handed and not dims:  # nothing left to search on its own: the read path's answer is the stage
            first = _Stage([], [from_finding(finding, facts)], dict(handed), [])  # type: ignore[arg-type]
        else:
            tuned = await tune(ctx, name, probe, dims, current, metric=metric, confirm=False, pinned=pinned)
            first = await _streams_stage(ctx, probe, tuned, current, metric, io)
            if handed:
                first.recommendations.insert(0, from_finding(finding, facts))  # type: ignore[arg-type]
                first.chosen = {**handed, **first.chosen}
        if first.pinned is not None:  # the daemon's re-validation: the stored recommendation against today, no search
            tuned = first.pinned
            assert tuned.decided is not None
            recs = [_rec(k, tuned.decided, facts, io) for k in pinned]
            reason = tuned.warm_start or "the stored recommendation, re-validated"  # a pin's note, always set
            return FamilyResult(FamilyOutcome(status="done", reason=reason, **outcome),
                                trials=tuned.trials, recommendations=recs, restored=restored)
        outcome.update(stop_reason=first.stop_reason, warm_start=first.warm_start)
        trials += first.trials
        recs += first.recommendations
        notes = first.notes + notes
        if not first.recommendations:
            return FamilyResult(FamilyOutcome(status="failed", reason="; ".join(notes), **outcome), trials=trials,
                                restored=restored)
        chosen = first.chosen
        pool = workers_dim is not None and workers_dim.name == aio.POOL_MAX  # 19: searched only where it filled
        if pool and (full := aio.pool_never_full(trials, int(io[aio.POOL_MAX]["setting"]))) is not None:
            notes.append(full)
        elif workers_dim is not None:
            stage = await _workers_stage(ctx, probe, workers_dim, chosen, metric, io)
            trials += stage.trials
            recs += stage.recommendations
            notes += stage.notes
            chosen = stage.chosen
        if methods:
            stage = await _method_stage(ctx, probe, methods, chosen, metric, io)
            trials += stage.trials
            recs += stage.recommendations
            notes += stage.notes
    finally:  # (the list the result holds is filled here, before the caller sees it)
        if system is not None:
            for r in await system.put_back():
                log.info("restored", detail=r.sentence())
                restored.append(r.sentence())
    reason = "; ".join(["search and confirmation finished", *notes])
    return FamilyResult(FamilyOutcome(status="done", reason=reason, **outcome), trials=trials, recommendations=recs,
                        restored=restored)


async def _streams_stage(ctx: FamilyContext, probe: Probe, tuned: Tuned, current: dict[str, Any],
                         metric: str, io: dict[str, dict[str, Any]]) -> _Stage:
    """effective_io_concurrency, jointly with io_combine_limit where it is searched (``tuned``: the search):
    confirm, and give each knob the search kept its own interval."""
    if tuned.pinned:
        return _Stage(tuned.trials, [], current, [], pinned=tuned)
    if tuned.found is None or tuned.candidate is None:
        return _Stage(tuned.trials, [], current, [f"the search found nothing: {tuned.stop_reason}"],
                      tuned.stop_reason, tuned.warm_start)
    best = dict(tuned.candidate)  # the search's answer as the plateau rule settled it
    stage = await _confirm_each(ctx, probe, tuned.trials, current, best, tuned.found.near_optimal, metric, io, [])
    stage.stop_reason, stage.warm_start = tuned.stop_reason, tuned.warm_start
    return stage


async def _workers_stage(ctx: FamilyContext, probe: Probe, dim: Dimension, fixed: dict[str, Any], metric: str,
                         io: dict[str, dict[str, Any]]) -> _Stage:
    """io_workers (19: io_max_workers; reload), searched at the values found for the session knobs."""
    knob = dim.name
    current = {knob: dim.snap(int(io[knob]["setting"]))}
    at = Fixed(probe, fixed)
    # No warm start: the stored trials of io_workers were measured at other values of the session knobs.
    tuned = await tune(ctx, Concurrency.name, at, [dim], current, metric=metric, confirm=False, warm_start=False)
    if tuned.found is None or tuned.candidate is None:
        return _Stage(tuned.trials, [], fixed, [f"{knob}: the search found nothing: {tuned.stop_reason}"])
    best = dict(tuned.candidate)
    stage = await _confirm_each(ctx, at, tuned.trials, current, best, tuned.found.near_optimal, metric, io, [])
    stage.chosen = {**fixed, **stage.chosen}
    return stage


async def _method_stage(ctx: FamilyContext, probe: Probe, methods: list[str], fixed: dict[str, Any], metric: str,
                        io: dict[str, dict[str, Any]]) -> _Stage:
    """io_method (restart): each alternative in paired trials against today's, at the values found above. The
    confirmed change with the largest effect is recommended; else today's is kept, with the best alternative's
    interval as the evidence."""
    today = str(io[METHOD]["setting"])
    decisions = []
    trials: list[Trial] = []
    for alt in methods:
        decided = await decide({**fixed, METHOD: today}, {**fixed, METHOD: alt}, probe, ctx.policy, metric=metric,
                               progress=ctx.progress)
        trials += decided.trials
        decisions.append(decided)

    def rank(d: Decision) -> tuple[bool, float]:
        return d.decision == "change", d.effect.improvement if d.effect is not None else 0.0

    pick = max(decisions, key=rank)
    rec = _rec(METHOD, pick, ctx.facts, io)
    others = [f"{d.candidate[METHOD]}: {d.decision}"
              + (f" ({d.effect.improvement:.3g}x, CI {d.effect.ci95[0]:.3g}-{d.effect.ci95[1]:.3g})" if d.effect else
                 f" ({d.reason})") for d in decisions if d is not pick]
    if others:
        rec = rec.model_copy(update={"reason": f"{rec.reason}; also screened: {'; '.join(others)}"})
    chosen = pick.candidate if pick.decision == "change" else pick.current
    return _Stage(trials, [rec], chosen, [f"{METHOD} screened: {', '.join(methods)} against today's {today}"])


async def _confirm_each(ctx: FamilyContext, probe: Probe, searched: list[Trial], current: dict[str, Any],
                        best: dict[str, Any], near: NearOptimal, metric: str,
                        io: dict[str, dict[str, Any]], notes: list[str]) -> _Stage:
    """Confirm the search's optimum against today's values in paired trials; where the optimum is today's value,
    the best other values measured instead. A knob that did not move in that comparison is then confirmed on its
    own — today's value against its best other value measured, at the values chosen for the others — so that every
    knob's decision carries an interval."""
    policy = ctx.policy
    candidate = best if best != current else (_runner_up(searched, current) or best)
    decided = await decide(current, candidate, probe, policy, metric=metric, near_optimal=near, progress=ctx.progress)
    trials = [*searched, *decided.trials]
    chosen = dict(candidate if decided.decision == "change" else current)
    recs = []
    for knob in current:
        if candidate[knob] != current[knob]:
            recs.append(_rec(knob, decided, ctx.facts, io))
            continue
        alt = _runner_up_value(searched, knob, current[knob])
        if alt is None:  # nothing else measured: kept without an interval of its own
            recs.append(_rec(knob, decided, ctx.facts, io))
            continue
        own = await decide(chosen, {**chosen, knob: alt}, probe, policy, metric=metric, near_optimal=near,
                           progress=ctx.progress)
        trials += own.trials
        rec = _rec(knob, own, ctx.facts, io)
        against = (f"today's {current[knob]} against {alt}, the best other value measured"
                   + (f" (at {', '.join(f'{k} = {v}' for k, v in chosen.items() if k != knob)})" if len(chosen) > 1 else ""))
        recs.append(rec.model_copy(update={"reason": f"{against}: {rec.reason}"}))
        if own.decision == "change":
            chosen[knob] = alt
    return _Stage(trials, recs, chosen, notes)


def _rec(knob: str, decided: Decision, facts: Any, io: dict[str, dict[str, Any]]) -> Recommendation:
    """The recommendation for ``knob`` from ``decided``, its reason closing with the two scan kinds' times."""
    spec = bounds.spec(knob, facts)
    assert spec is not None
    source = facts.settings[knob].source if knob in facts.settings else "default"
    rec = recommendation(knob, decided, source=source, requires=spec.requires)
    scans = concurrency_figures.scan_note(decided)
    return rec.model_copy(update={"reason": f"{rec.reason}{scans}"}) if scans and rec.effect is not None else rec


def _medians(trials: list[Trial]) -> list[tuple[float, dict[str, Any]]]:
    """Each configuration the search measured, with its median time, fastest first."""
    by: dict[tuple[tuple[str, Any], ...], list[float]] = {}
    for t in trials:
        if t.status == "ok" and t.value is not None and t.phase == "search":
            by.setdefault(tuple(sorted(t.config.items())), []).append(t.value)
    return sorted((statistics.median(v), dict(k)) for k, v in by.items())


def _runner_up(trials: list[Trial], current: dict[str, Any]) -> dict[str, Any] | None:
    """The fastest configuration the search measured other than today's, over today's knobs."""
    for _ms, cfg in _medians(trials):
        mine = {k: cfg.get(k) for k in current}
        if mine != current and all(v is not None for v in mine.values()):
            return mine
    return None


def _runner_up_value(trials: list[Trial], knob: str, today: Any) -> Any:
    """``knob``'s value in the fastest configuration the search measured where it is not today's."""
    return next((cfg[knob] for _ms, cfg in _medians(trials) if knob in cfg and cfg[knob] != today), None)


def _icl_dimension(policy: Policy, ctx: FamilyContext, io: dict[str, dict[str, Any]]) -> Dimension | str:
    """io_combine_limit's search range: below io_max_combine_limit (18), which silently caps what SET asks."""
    dim = bounds.dimension(ICL, policy, ctx.facts)
    if isinstance(dim, str) or ICL_CAP not in io:
        return dim
    cap = int(io[ICL_CAP]["setting"])
    if cap <= dim.low:
        return f"{ICL_CAP} = {cap} (a restart-level cap) leaves nothing to search"
    if cap >= dim.high:
        return dim
    # The cap is this server's limit (raising it is a restart), not the policy's: an answer at it says so.
    return replace(dim, high=cap, limits=(dim.limits[0], True))


async def server_port(ctx: FamilyContext) -> int:
    """The target's port as the server reports it (``SHOW port``): part of the identity a system knob's journal
    entry is restored against."""
    async with ctx.connection() as conn:
        return int(await conn.fetchval("SHOW port"))
