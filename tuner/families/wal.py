"""The WAL family: the flush-side settings an operator can change, measured under concurrent inserts on a writable
staging clone, plus the evidence of whether WAL insertion-lock contention is the bottleneck at all.

Insertion locks are ``NUM_XLOGINSERT_LOCKS``, compiled in as 8 in every release (the GUC existed only in 9.4 betas:
postgres commit 5fa6c81a43, "Remove num_xloginsert_locks GUC, replace with a #define"): tuner measures their
contention and says what it implies; it never pretends they are a setting. Durability settings (``fsync``,
``synchronous_commit``, ``full_page_writes``) are never touched.

1. search the policy's WAL knobs (``commit_delay``, ``commit_siblings`` by SET in every load connection;
   ``wal_writer_delay``, ``wal_writer_flush_after`` by ALTER SYSTEM + reload, journaled) at the policy's client
   count and transaction shape, minimising ms per transaction (1000 / TPS); confirm the winner in ABBA pairs;
2. screen ``wal_compression`` (SET) against today's value, and — only when the policy allows restarts —
   ``wal_buffers`` (ALTER SYSTEM + restart), each in its own paired trials: the "needs restart" group;
3. run the scaling curve (TPS at 1, 2, 4 … clients, both transaction shapes) under today's and the recommended
   settings, with the share of backend time in each kind of WAL wait;
4. put ``postgresql.auto.conf`` back exactly as it was, reload (and restart if a restart-level knob was probed).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar, Literal

import asyncpg

from tuner.actuate import Journal
from tuner.core import bounds
from tuner.core.decide import decide, recommendation
from tuner.core.loops import Progress
from tuner.core.tune import tune
from tuner.errors import ProbeError, RefusedError, TunerError
from tuner.families import plans, wal_figures, wal_flush, wal_legacy, wal_sections
from tuner.families.base import Endpoint, Family, FamilyContext, FamilyResult, Needs, skipped
from tuner.families.wal_sections import WalContentionOut, WalScalingOut
from tuner.knobs import catalog
from tuner.log import get_logger
from tuner.report.model import FamilyOutcome, Recommendation, Trial
from tuner.settings.policy import Policy
from tuner.probes import walload
from tuner.session.stop import STOP
from tuner import redact

log = get_logger("tuner.wal")

FAMILY = "wal"
COMPRESSION = "wal_compression"
BUFFERS = "wal_buffers"
METRIC = "ms_per_transaction"
INSERT_LOCKS = 8  # NUM_XLOGINSERT_LOCKS in every PostgreSQL release


@dataclass
class WalResult:
    """What the WAL family gathers while it runs; its report section is ``contention``, ``scaling``, ``summary``."""

    trials: list[Trial] = field(default_factory=list)
    recommendations: list[Recommendation] = field(default_factory=list)
    contention: list[WalContentionOut] = field(default_factory=list)
    scaling: list[WalScalingOut] = field(default_factory=list)
    warm_start: str | None = None


class WalProbe:
    """``await probe(config, phase=…, arm=…) -> Trial``: apply the config (SET for session knobs, journaled ALTER
    SYSTEM + reload or restart for the others), run one load point, value = ms per transaction."""

    def __init__(
        self, *, dsn: str | None, journal: Journal, restart: Callable[[], Awaitable[None]] | None,
        contexts: dict[str, str], clients: int, rows_per_tx: int, duration_s: float, warmup_s: float,
        identity: dict[str, Any], connect_timeout_s: float,
        connector: Callable[..., Awaitable[asyncpg.Connection]],
    ) -> None:
        self.dsn, self.journal, self.restart = dsn, journal, restart
        self.connector = connector  # checked connections to the clone (the session's guard)
        self.contexts = contexts
        self.clients, self.rows_per_tx = clients, rows_per_tx
        self.duration_s, self.warmup_s = duration_s, warmup_s
        self.identity = identity
        self.connect_timeout_s = connect_timeout_s
        self.applied: dict[str, str] = {}  # system-level values in force now

    async def apply_system(self, wanted: dict[str, str]) -> None:
        changed = {k: v for k, v in wanted.items() if self.applied.get(k) != v}
        if not changed:
            return
        await self.journal.alter_system_and_reload(self.connector, changed, dsn=self.dsn, **self.identity)
        if any(self.contexts[k] == "postmaster" for k in changed):
            if self.restart is None:
                raise TunerError("a restart-level WAL setting needs [target] restart_command")
            await self.restart()
        self.applied.update(changed)

    async def __call__(
        self, config: dict[str, Any], *, phase: Literal["search", "confirm", "scaling"] = "search",
        arm: Literal["baseline", "candidate"] | None = None, clients: int | None = None, rows_per_tx: int | None = None,
    ) -> Trial:
        started = datetime.now(UTC)
        t0 = time.monotonic()
        clients = clients or self.clients
        rows = rows_per_tx or self.rows_per_tx
        session = {k: str(v) for k, v in config.items() if self.contexts[k] in ("user", "superuser")}
        system = {k: str(v) for k, v in config.items() if self.contexts[k] in ("sighup", "postmaster")}
        try:
            await self.apply_system(system)
            res = await walload.run(self.dsn, clients=clients, rows_per_tx=rows, duration_s=self.duration_s,
                                    warmup_s=self.warmup_s, settings=session, connect_timeout_s=self.connect_timeout_s,
                                    connector=self.connector)
        except RefusedError:
            raise  # the clone is no longer what the interlock cleared: the session stops
        except (TunerError, asyncpg.PostgresError, OSError, asyncpg.InterfaceError) as exc:
            return self._trial(config, None, "failed", phase, arm, {}, f"{type(exc).__name__}: {exc}", started, t0)
        if res.transactions == 0:
            return self._trial(config, None, "failed", phase, arm, res.metrics(),
                               f"no transaction committed ({res.errors} errors)", started, t0)
        return self._trial(config, res.ms_per_tx, "ok", phase, arm, res.metrics(), None, started, t0)

    def _trial(self, config: dict[str, Any], value: float | None, status: Literal["ok", "failed", "rejected"],
               phase: Literal["search", "confirm", "scaling"], arm: Literal["baseline", "candidate"] | None,
               metrics: dict[str, float], reason: str | None, started: datetime, t0: float) -> Trial:
        t = Trial(config=dict(config), value=value, status=status, phase=phase, arm=arm, reason=reason,
                  started_at=started, duration_s=round(time.monotonic() - t0, 3), metrics=metrics)
        log.info("probe", family=FAMILY, phase=phase, arm=arm, config=config, status=status,
                 ms_per_tx=None if value is None else round(value, 3), tps=metrics.get("tps"),
                 insert_wait=metrics.get("wal_insert_wait_share"), reason=reason, duration_s=t.duration_s)
        return t


class Wal(Family):
    name: ClassVar[str] = FAMILY
    needs: ClassVar[Needs] = Needs(writable=True, superuser=True)
    # After the replay family: this family's loads write gigabytes of WAL (5.2 GB in a default sandbox session),
    # more than the primary keeps for a standby without a replication slot, so a standby that falls behind during
    # them never catches up and the replay family, run after, found replay stalled and was skipped.
    after: ClassVar[tuple[str, ...]] = ("replay",)
    summary: ClassVar[str] = "commit_delay, wal_writer_* (searched), wal_compression, wal_buffers (screened)"
    objective_unit: ClassVar[str] = "ms per transaction"
    honours_pins: ClassVar[bool] = True  # a stored WAL setting is re-validated by pinning it
    html_sections = staticmethod(wal_figures.html_sections)
    upgrade_report = staticmethod(wal_legacy.upgrade_report)  # scaling runs stored as search before issue #47
    policy_section: ClassVar[type[wal_sections.Policy]] = wal_sections.Policy
    report_section: ClassVar[type[wal_sections.Report]] = wal_sections.Report

    def applicable(self, ctx: FamilyContext) -> str | None:
        return None

    async def preflight(self, ctx: FamilyContext) -> plans.FamilyPlan:
        """What `tuner check` shows: the load, and how long each probe lasts by the policy."""
        wp = ctx.policy.section(FAMILY)  # FAMILY, not self.name: a benchmark's subclass shares the [wal] table
        return plans.load(self.name, f"{wp.clients} clients inserting {wp.rows_per_tx}-row transactions into a "
                             f"scratch schema ({wp.warmup_s:g} s warm-up, {wp.duration_s:g} s measured); then scaling runs at "
                             f"{', '.join(map(str, wp.scaling_clients))} clients", wp.warmup_s + wp.duration_s)

    async def run(self, ctx: FamilyContext) -> FamilyResult:
        where = ctx.writable
        assert where is not None  # the family needs a writable endpoint: the orchestrator checked it
        async with ctx.connection(where) as conn:
            rows = await conn.fetch(
                "SELECT name, setting, context, vartype, enumvals, source FROM pg_settings WHERE name = ANY($1::text[])",
                [*catalog.load().names("wal"), COMPRESSION])
            settings = {r["name"]: dict(r) for r in rows}
            try:
                await walload.check_own(conn)
            except ProbeError as exc:
                return skipped(FAMILY, f"{exc} ({exc.hint})")
            identity: dict[str, Any] = {"system_identifier": where.facts.system_identifier,
                        "port": int(await conn.fetchval("SHOW port")), "sandbox_dir": ctx.sandbox_dir}
            ctx.journal.scratch_schema(dsn=where.dsn, **identity)  # journaled before it exists
            await walload.prepare(conn)
        result, restored = WalResult(), []
        probe = probe_for(ctx, where, settings, identity)
        try:
            await _tune(ctx, where, probe, settings, result)
        finally:
            restored = await put_back(probe, ctx.journal, where.restart)
        wp = ctx.policy.section(FAMILY)
        place = ("the sandbox's primary (tuner's own, marked staging)" if ctx.sandbox_dir
                 else f"{redact.dsn(where.dsn)} ({where.facts.server_version})")
        knobs = _knobs(ctx, where, settings)
        return FamilyResult(
            FamilyOutcome(family=FAMILY, status="done",
                          reason=(f"re-validated on {place}" if FAMILY in ctx.pins
                                  else f"searched, confirmed and measured the scaling curve on {place}"),
                          workload=[f"{wp.clients} clients x INSERT of {wp.rows_per_tx} rows per transaction "
                                    f"into {walload.TABLE}, {wp.duration_s:g} s per probe"],
                          optimiser="bayesian" if knobs else None, warm_start=result.warm_start),
            trials=result.trials, recommendations=result.recommendations, restored=restored,
            section=wal_sections.Report(wal_contention=result.contention, wal_scaling=result.scaling,
                                        wal_summary=_summary(result.contention, result.scaling,
                                                             where.facts.major)),
        )


def _knobs(ctx: FamilyContext, where: Endpoint, settings: dict[str, dict[str, Any]]) -> list[str]:
    """The policy's searched WAL knobs this server has (wal_buffers is screened, never searched)."""
    return [k for k in ctx.policy.search if (s := bounds.spec(k, where.facts)) and s.family == FAMILY
            and k in settings and k != BUFFERS]


def probe_for(ctx: FamilyContext, where: Endpoint, settings: dict[str, dict[str, Any]],
              identity: dict[str, Any]) -> WalProbe:
    """The family's probe at the policy's load (public: benchmarks/wal_truth.py measures its truth with it)."""
    wp = ctx.policy.section(FAMILY)
    return WalProbe(dsn=where.dsn, journal=ctx.journal, restart=where.restart,
                    contexts={k: settings[k]["context"] for k in settings}, clients=wp.clients,
                    rows_per_tx=wp.rows_per_tx, duration_s=wp.duration_s, warmup_s=wp.warmup_s, identity=identity,
                    connect_timeout_s=ctx.cfg.target.connect_timeout_s, connector=where.connect)


async def _tune(ctx: FamilyContext, where: Endpoint, probe: WalProbe, settings: dict[str, dict[str, Any]],
                result: WalResult) -> None:
    policy, wp = ctx.policy, ctx.policy.section(FAMILY)
    knobs = _knobs(ctx, where, settings)
    current = {k: int(settings[k]["setting"]) for k in knobs}
    recommended: dict[str, Any] = dict(current)
    log.info("plan", family=FAMILY, knobs=knobs, current=current, clients=wp.clients, rows_per_tx=wp.rows_per_tx,
             duration_s=wp.duration_s, insert_locks=INSERT_LOCKS)
    if knobs:
        dims = []
        for k in knobs:
            dim = bounds.dimension(k, policy, where.facts)
            if isinstance(dim, str):
                raise TunerError(f"cannot search {k}: {dim}")
            dims.append(dim)
        # A warm start from the latest stored session on a matching target: its trials of these same knobs (the
        # screens' trials carry one more knob and are left out). A pin (the daemon's re-validation of the searched
        # knobs' stored recommendation) runs no screens.
        tuned = await tune(ctx, FAMILY, probe, dims, current, metric=METRIC)
        result.trials.extend(tuned.trials)
        result.warm_start = tuned.warm_start
        if tuned.decided is not None:
            for k in knobs:
                rec = recommendation(k, tuned.decided, source=settings[k]["source"], requires=_requires(settings[k]))
                result.recommendations.append(rec)
                if rec.decision == "change":
                    recommended[k] = rec.recommended
        if tuned.pinned:
            return
    # Screens: one alternative each, paired against today's value.
    screens: list[tuple[str, Any, Any]] = []
    comp = _compression_candidate(settings.get(COMPRESSION), wp.wal_compression)
    if comp is not None:
        screens.append((COMPRESSION, settings[COMPRESSION]["setting"], comp))
    if BUFFERS in settings and wp.wal_buffers:
        now = int(settings[BUFFERS]["setting"])
        if probe.restart is None:
            log.info("plan.skip", knob=BUFFERS, reason="restart-level: needs [target] restart_command and "
                     "guardrails.allow_restart")
        elif (alt := next((b for b in wp.wal_buffers if b != now), None)) is not None:
            screens.append((BUFFERS, now, alt))
    for knob, now, alt in screens:
        decided = await decide({**recommended, knob: now}, {**recommended, knob: alt}, probe, policy, metric=METRIC,
                               progress=ctx.progress)
        result.trials.extend(decided.trials)
        rec = recommendation(knob, decided, source=settings[knob]["source"], requires=_requires(settings[knob]))
        result.recommendations.append(rec)
        if rec.decision == "change":
            recommended[knob] = alt
    today = {k: (settings[k]["setting"] if k == COMPRESSION else int(settings[k]["setting"])) for k in recommended}
    await _scaling(probe, policy, today, recommended, result, ctx.progress)


def _requires(setting: dict[str, Any]) -> Literal["reload", "restart"]:
    return "restart" if setting["context"] == "postmaster" else "reload"


def _compression_candidate(setting: dict[str, Any] | None, wanted: tuple[str, ...]) -> str | None:
    """The first of the policy's alternatives this build offers and today's value is not."""
    if setting is None or not wanted:
        return None
    offered = list(setting["enumvals"] or (["on", "off"] if setting["vartype"] == "bool" else []))
    return next((w for w in wanted if w in offered and w != setting["setting"]), None)


async def _scaling(
    probe: WalProbe, policy: Policy, today: dict[str, Any], recommended: dict[str, Any], result: WalResult,
    progress: Progress,
) -> None:
    wp = policy.section(FAMILY)
    differs = recommended != today
    # One run per point, marked as such in the report (readings=1) and the figure: repeating each point three
    # times would add a third to a half of the WAL family's time (~26 s of its ~340 s per arm in the example
    # report's session) for a curve that decides nothing; the decisions come from the paired confirmations, whose
    # repeated readings the figure shows as the scale of run-to-run noise.
    progress.phase("wal scaling", len(wp.scaling_clients) * len(wp.scaling_rows_per_tx) * (2 if differs else 1))
    for rows in wp.scaling_rows_per_tx:
        for n in wp.scaling_clients:
            STOP.check()
            # phase "scaling": at other loads than the searched one, so never a search observation (issue #47)
            cur = await probe(today, phase="scaling", clients=n, rows_per_tx=rows)
            result.trials.append(cur)
            progress.advance(f"{n} clients x {rows} rows: {cur.metrics.get('tps', 0):.0f} TPS")
            rec = None
            if differs:
                rec = await probe(recommended, phase="scaling", clients=n, rows_per_tx=rows)
                result.trials.append(rec)
            m = cur.metrics
            result.contention.append(WalContentionOut(
                clients=n, rows_per_tx=rows, tps=m.get("tps"),
                wal_insert_wait_share=m.get("wal_insert_wait_share"), wal_write_wait_share=m.get("wal_write_wait_share"),
                wal_sync_wait_share=m.get("wal_sync_wait_share"),
                wal_buf_mapping_wait_share=m.get("wal_buf_mapping_wait_share"),
                p95_latency_ms=m.get("p95_latency_ms"), wal_fsyncs_per_tx=m.get("wal_fsyncs_per_tx"),
            ))
            result.scaling.append(WalScalingOut(
                clients=n, rows_per_tx=rows, tps_current=m.get("tps") if cur.status == "ok" else None,
                tps_recommended=(rec.metrics.get("tps") if rec is not None and rec.status == "ok" else None),
                readings=1, reading_s=wp.duration_s,
                fsyncs_per_tx_recommended=(rec.metrics.get("wal_fsyncs_per_tx") if rec is not None
                                           and rec.status == "ok" else None),
            ))


async def put_back(probe: WalProbe, journal: Journal, restart: Callable[[], Awaitable[None]] | None) -> list[str]:
    """postgresql.auto.conf exactly as it was, reloaded (restarted if a restart-level knob was probed); the
    scratch schema dropped. Only on the clone the interlock cleared (the guard checks the connection)."""
    conn = await probe.connector()
    try:
        restored = await journal.restore_system(conn)  # ALTER SYSTEM lines, then the scratch schema
        await conn.execute("SELECT pg_reload_conf()")
    finally:
        await conn.close()
    for r in restored:
        log.info("restored", detail=r.sentence())
    if any(probe.contexts.get(r.name) == "postmaster" and r.action == "restored" for r in restored) and restart:
        await restart()
    return [r.sentence() for r in restored]


def _summary(contention: list[WalContentionOut], scaling: list[WalScalingOut], major: int) -> str | None:
    """The insertion-lock verdict, then (on a slow flush) what the flush costs per commit and what grouping
    recovered (issue #55 item 4)."""
    head = _locks(contention, major)
    flush = wal_flush.flush_sentence(contention, scaling)
    return " ".join(s for s in (head, flush) if s) or None


def _locks(contention: list[WalContentionOut], major: int) -> str | None:
    shares = [(c.clients, c.rows_per_tx, c.wal_insert_wait_share) for c in contention if c.wal_insert_wait_share is not None]
    if not shares:
        return None
    n, rows, worst = max(shares, key=lambda s: s[2] or 0)
    flush = max((c.wal_write_wait_share or 0) + (c.wal_sync_wait_share or 0) for c in contention)
    head = (f"WAL insertion locks are fixed at {INSERT_LOCKS} in PostgreSQL {major} (NUM_XLOGINSERT_LOCKS is compiled "
            f"in; no setting changes it). The most time load backends spent waiting for them was "
            f"{worst:.0%} (at {n} clients, {rows} rows per transaction)")
    if (worst or 0) >= 0.25:
        return head + ("; that is a real bottleneck, which only fewer concurrent writers (a pooler) or larger "
                       "transactions ease here.")
    return head + (f"; they are not the bottleneck. Up to {flush:.0%} went to WAL writes and flushes, which "
                   "commit_delay/commit_siblings (group commit), wal_writer settings and faster WAL storage address.")
