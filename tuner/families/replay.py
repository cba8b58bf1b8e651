"""The replay family: ``maintenance_io_concurrency`` where a staging replica feels it — recovery prefetch (15+,
``recovery_prefetch = try`` by default), which looks ahead in the WAL and issues ``posix_fadvise`` for the pages
replay is about to read, up to ``maintenance_io_concurrency`` at a time.

It needs both servers of a streaming pair: the primary (the sandbox's own, or a writable staging primary: it makes
the WAL, in tuner's journaled scratch schema) and its hot standby (the target: replay is measured there). The knob is
set on the standby with ALTER SYSTEM + reload — the startup process reads only the configuration files — journaled
as a hot standby's entry and put back byte for byte. Each probe pauses the standby's replay (journaled too, so a
crash never leaves it paused: restoring the entry resumes replay), makes the same WAL stream of random-page updates
on the primary, empties the standby's caches and times its catch-up (:mod:`tuner.probes.replayload` says how, and why
not by a restart). The report gives the replay rate in MB of WAL per second today and at the recommended value.
"""

from __future__ import annotations

import math
import statistics
from typing import Any, ClassVar

import asyncpg

from tuner.core import bounds
from tuner.core.decide import Decision, recommendation
from tuner.core.tune import tune
from tuner.errors import ProbeError, RefusedError, TunerError
from tuner.families import plans, replay_sections
from tuner.families.base import Endpoint, Family, FamilyContext, FamilyResult, Needs, skipped
from tuner.families.replay_sections import ReplayOut
from tuner.log import get_logger
from tuner.report.model import FamilyOutcome, Trial
from tuner.probes import replayload, workload
from tuner.probes.cache import CacheControl, choose_os_method
from tuner import redact

log = get_logger("tuner.replay")

FAMILY = "replay"
KNOB = replayload.KNOB
MIN_VERSION = 150000  # recovery_prefetch came in 15


class Replay(Family):
    name: ClassVar[str] = FAMILY
    needs: ClassVar[Needs] = Needs(writable=True, superuser=True)
    after: ClassVar[tuple[str, ...]] = ()
    summary: ClassVar[str] = ("maintenance_io_concurrency on a hot standby (ALTER SYSTEM + reload, journaled), over "
                              "its cold catch-up on a fixed WAL stream of random-page updates from its primary")
    objective_unit: ClassVar[str] = "ms (the standby's time to replay the WAL stream)"
    policy_section: ClassVar[type[replay_sections.Policy]] = replay_sections.Policy
    report_section: ClassVar[type[replay_sections.Report]] = replay_sections.Report

    def applicable(self, ctx: FamilyContext) -> str | None:
        facts = ctx.facts
        if not facts.in_recovery:
            return ("the target is not a hot standby: recovery prefetch is measured on a standby replaying its "
                    "primary's WAL")
        if facts.server_version_num < MIN_VERSION:
            return f"PostgreSQL {facts.server_version} has no recovery prefetch (recovery_prefetch came in 15)"
        dim = bounds.dimension(KNOB, ctx.policy, facts)
        if isinstance(dim, str):
            return dim
        primary = ctx.writable
        if primary is None or primary.facts.system_identifier != facts.system_identifier:
            return ("no writable primary of this standby is available: the writable server's system identifier "
                    f"({primary.facts.system_identifier if primary else 'none'}) is not the standby's "
                    f"({facts.system_identifier})")
        if not facts.is_superuser:
            return "it needs a superuser on the standby (ALTER SYSTEM, CHECKPOINT, pg_wal_replay_pause())"
        if facts.local_data_directory() is None:
            return ("tuner is not running on the standby's host: it empties the standby's page cache and reads its "
                    "startup process's I/O counters there")
        return None

    async def preflight(self, ctx: FamilyContext) -> plans.FamilyPlan:
        """What `tuner check` shows: the WAL stream each probe replays."""
        return plans.load(self.name, f"one-row updates of {ctx.policy.section(self.name).pages} random heap pages on the "
                             "primary, replayed by the paused standby from a cold cache")

    async def run(self, ctx: FamilyContext) -> FamilyResult:
        primary, standby = ctx.writable, ctx.target
        assert primary is not None  # the family needs a writable endpoint: the orchestrator checked it
        rp = ctx.policy.section(FAMILY)
        async with ctx.connection(standby) as s:
            prefetch = str(await s.fetchval("SHOW recovery_prefetch"))
            standby_port = int(await s.fetchval("SHOW port"))
            shared_buffers = int(await s.fetchval("SELECT setting::int FROM pg_settings WHERE name = 'shared_buffers'"))
            delay_ms = int(await s.fetchval("SELECT setting::int FROM pg_settings "
                                            "WHERE name = 'recovery_min_apply_delay'"))
            pause_state = str(await s.fetchval("SELECT pg_get_wal_replay_pause_state()"))
        if prefetch == "off":
            return skipped(FAMILY, "recovery_prefetch is off on the standby, so maintenance_io_concurrency does not "
                                   "act on its replay (set recovery_prefetch = try to let it)")
        if pause_state != "not paused":
            return skipped(FAMILY, f"the standby's replay is {pause_state} (not by tuner), and tuner leaves it so")
        if delay_ms > 0:
            return skipped(FAMILY, f"the standby applies WAL with recovery_min_apply_delay = {delay_ms} ms, which "
                                   "the catch-up would measure instead of its reads")
        table_pages = math.ceil(rp.table_shared_buffers * shared_buffers)
        filler_pages = math.ceil(rp.filler_shared_buffers * shared_buffers)
        block = int(standby.facts.settings["block_size"].setting) if "block_size" in standby.facts.settings else 8192
        need_mb = (table_pages + filler_pages) * block / 2**20
        if need_mb > rp.max_scratch_mb:
            return skipped(FAMILY, f"the scratch table and filler would need {need_mb:.0f} MB on each server (the "
                                   f"standby's shared_buffers is {shared_buffers * block / 2**20:.0f} MB), more than "
                                   f"[replay] max_scratch_mb = {rp.max_scratch_mb}")
        async with ctx.connection(primary) as p:
            primary_port = int(await p.fetchval("SHOW port"))
        p_identity: dict[str, Any] = {"system_identifier": primary.facts.system_identifier, "port": primary_port,
                                      "sandbox_dir": ctx.sandbox_dir}
        s_identity: dict[str, Any] = {"system_identifier": standby.facts.system_identifier, "port": standby_port,
                                      "sandbox_dir": ctx.sandbox_dir}
        ctx.journal.scratch_schema(dsn=primary.dsn, **p_identity)  # journaled before it exists
        result: FamilyResult
        try:
            result = await self._run(ctx, primary, standby, prefetch, table_pages, filler_pages, s_identity)
        finally:
            restored = await _put_back(ctx, primary, standby)
        result.restored.extend(restored)
        return result

    async def _run(self, ctx: FamilyContext, primary: Endpoint, standby: Endpoint, prefetch: str, table_pages: int,
                   filler_pages: int, s_identity: dict[str, Any]) -> FamilyResult:
        policy, rp = ctx.policy, ctx.policy.section(FAMILY)
        local = standby.facts.local_data_directory()
        assert local is not None  # applicable() checked it
        ctx.progress.phase("replay setup", None)
        try:
            async with ctx.connection(primary) as p:
                layout = await replayload.prepare(p, table_pages=table_pages, filler_pages=filler_pages, pages=rp.pages,
                                              seed=ctx.cfg.tuner.seed, on_step=ctx.progress.advance)
                built = await replayload.current_lsn(p)
            async with ctx.connection(standby) as s:
                # Not the probe's timeout: the standby may still be replaying what an earlier family wrote (the
                # WAL family's load) besides the scratch tables just built, and on a loaded host that can take
                # longer than one probe's stream; only a replay that stops advancing is a failure.
                try:
                    await replayload.wait_caught_up(s, built, stall_s=rp.catch_up_timeout_s)
                except ProbeError as exc:
                    raise ProbeError(f"{exc}: is it replaying this primary's WAL?") from None
                files = await workload.relation_files(s, local, replayload.TABLE)
        except ProbeError as exc:
            return skipped(FAMILY, f"{exc} ({exc.hint})" if exc.hint else str(exc))
        except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as exc:
            return FamilyResult(FamilyOutcome(family=FAMILY, status="failed",
                                              reason=f"could not prepare the WAL stream: {type(exc).__name__}: {exc}"))
        os_method = choose_os_method(local, files)
        if os_method == "none":
            return skipped(FAMILY, "cannot empty the standby's OS page cache: run tuner as root, or as a user who can "
                                   "read the standby's relation files")
        cache = CacheControl(restart=None, os_method=os_method, files=files)
        method = (f"per probe: CHECKPOINT and a pre-touch of the stream's pages on the primary (their full-page "
                  f"images), replayed; standby paused; a restartpoint, then an index scan of a "
                  f"{layout.filler_pages * layout.block_size / 1e6:.0f} MB filler table through shared buffers "
                  f"(no restart: a restarted standby resumes replay from its last restartpoint); the stream made and "
                  f"received; OS page cache: {os_method}; replay resumed and timed")
        probe = replayload.ReplayProbe(
            primary=primary.connect, standby=standby.connect, journal=ctx.journal, layout=layout, cache=cache,
            standby_identity=s_identity, standby_dsn=standby.dsn,
            statement_timeout_s=policy.guardrails.statement_timeout_s, catch_up_timeout_s=rp.catch_up_timeout_s,
            min_cold_read_fraction=policy.cache.min_cold_read_fraction, family=self.name,
        )
        dim = bounds.dimension(KNOB, policy, standby.facts)
        assert not isinstance(dim, str)  # applicable() checked it
        today = bounds.today(KNOB, standby.facts)
        current = {KNOB: int(today.value)}
        spec = bounds.spec(KNOB, standby.facts)
        assert spec is not None
        workload_text = [(f"{layout.pages} one-row HOT updates of random pages (fixed order, seed "
                          f"{ctx.cfg.tuner.seed}) of {replayload.TABLE} ({layout.table_mb:g} MB, {layout.table_pages} "
                          "pages) on the primary, replayed by the standby from a cold cache")]
        place = ("the sandbox's hot standby and its primary" if ctx.sandbox_dir
                 else f"{redact.dsn(standby.dsn)} and its primary ({standby.facts.server_version})")
        outcome: dict[str, Any] = {"family": FAMILY, "workload": workload_text, "cache": method}
        trials: list[Trial] = []
        if FAMILY not in ctx.pins:
            log.info("plan", family=FAMILY, knob=KNOB, range=[dim.low, dim.high], current=current[KNOB],
                     pages=layout.pages, table_mb=layout.table_mb, recovery_prefetch=prefetch,
                     budget=ctx.budget if ctx.budget is not None else policy.budget.probes)
        tuned = await tune(ctx, FAMILY, probe, [dim], current, metric=replayload.METRIC)
        trials.extend(tuned.trials)
        if tuned.pinned:  # the daemon's re-validation: the stored recommendation against today, no search
            outcome.update(reason=f"{tuned.warm_start}, on {place}", warm_start=tuned.warm_start)
        else:
            outcome.update(stop_reason=tuned.stop_reason, optimiser=tuned.optimiser, warm_start=tuned.warm_start)
        decided = tuned.decided
        if decided is None:
            reason = tuned.stop_reason or "the search found nothing to recommend"
            return FamilyResult(FamilyOutcome(status="failed", reason=reason, **outcome), trials=trials)
        if not tuned.pinned:
            outcome.update(reason=("searched and confirmed" if decided.trials else "searched") + f" on {place}; "
                                  f"recovery_prefetch = {prefetch}")
        rec = recommendation(KNOB, decided, source=today.source, requires=spec.requires, run_on="target")
        section = replay_sections.Report(replay=_section(trials, decided, int(rec.recommended), layout, prefetch, method))
        return FamilyResult(FamilyOutcome(status="done", **outcome), trials=trials, recommendations=[rec],
                            section=section)


def _section(trials: list[Trial], decided: Decision, recommended: int, layout: replayload.Layout, prefetch: str,
             method: str) -> ReplayOut:
    """Replay rates today and at the recommendation (medians over every ok probe at each value)."""
    current = int(decided.current[KNOB])
    points = {p.maintenance_io_concurrency: p for p in replayload.curve(trials)}
    wal = [t.metrics["wal_mb"] for t in trials if t.status == "ok" and "wal_mb" in t.metrics]
    return ReplayOut(
        maintenance_io_concurrency_current=current, maintenance_io_concurrency_recommended=recommended,
        mb_per_s_current=points[current].mb_per_s if current in points else None,
        mb_per_s_recommended=points[recommended].mb_per_s if recommended in points else None,
        wal_mb=round(statistics.median(wal), 3) if wal else None, pages=layout.pages, table_mb=layout.table_mb,
        recovery_prefetch=prefetch, method=method, curve=list(points.values()),
    )


async def _put_back(ctx: FamilyContext, primary: Endpoint, standby: Endpoint) -> list[str]:
    """The standby replaying and its postgresql.auto.conf as it was (reloaded); the scratch schema dropped on the
    primary. Whatever fails stays in the journal, which the session restores on its way out."""
    done = []
    for endpoint, on_standby in ((standby, True), (primary, False)):
        try:
            async with ctx.connection(endpoint) as conn:
                done.extend(await ctx.journal.restore_system(conn, standby=on_standby))
                await conn.execute("SELECT pg_reload_conf()")
        except RefusedError:
            raise
        except (TunerError, asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as exc:
            log.warning("restore.deferred", server="standby" if on_standby else "primary",
                        error=f"{type(exc).__name__}: {exc}", detail="the journal keeps it for the session's end")
    for r in done:
        log.info("restored", detail=r.sentence())
    return [r.sentence() for r in done]
