"""The WAL family: the flush-side settings an operator can change, measured under concurrent inserts on a writable
staging clone, plus the evidence of whether WAL insertion-lock contention is the bottleneck at all.

Insertion locks are ``NUM_XLOGINSERT_LOCKS``, compiled in as 8 in every release (the GUC existed only in 9.4
betas; reference/pg-io-facts.md §3.1): tuner measures their contention and says what it implies; it never
pretends they are a setting. Durability settings (``fsync``, ``synchronous_commit``, ``full_page_writes``) are
never touched.

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
from typing import Any, Literal

import asyncpg

from tuner.config import Config
from tuner.errors import RefusedError, TunerError
from tuner.actuate import Journal
from tuner.knobs import catalog
from tuner.log import get_logger
from tuner.model import FamilyOutcome, RecommendationOut, Trial, WalContentionOut, WalScalingOut
from tuner.optimiser import Dimension
from tuner.policy import Policy
from tuner.probes import walload
from tuner.recommend import sql as sql_emit
from tuner.session import Progress, build_optimiser, confirm, effect_out, search
from tuner.stats import SequentialTest
from tuner.target import interlock
from tuner.target.connection import connect, redact, sets_marker_from_client
from tuner.target.facts import gather

log = get_logger("tuner.wal")

FAMILY = "wal"
COMPRESSION = "wal_compression"
BUFFERS = "wal_buffers"
METRIC = "ms_per_transaction"
INSERT_LOCKS = 8  # NUM_XLOGINSERT_LOCKS in every PostgreSQL release


@dataclass
class WalResult:
    outcome: FamilyOutcome
    trials: list[Trial] = field(default_factory=list)
    recommendations: list[RecommendationOut] = field(default_factory=list)
    contention: list[WalContentionOut] = field(default_factory=list)
    scaling: list[WalScalingOut] = field(default_factory=list)
    summary: str | None = None
    restored: list[str] = field(default_factory=list)


class WalProbe:
    """``await probe(config, phase=…, arm=…) -> Trial``: apply the config (SET for session knobs, journaled ALTER
    SYSTEM + reload or restart for the others), run one load point, value = ms per transaction."""

    def __init__(
        self, *, dsn: str | None, journal: Journal, restart: Callable[[], Awaitable[None]] | None,
        contexts: dict[str, str], clients: int, rows_per_tx: int, duration_s: float, warmup_s: float,
        identity: dict[str, Any], connect_timeout_s: float,
    ) -> None:
        self.dsn, self.journal, self.restart = dsn, journal, restart
        self.contexts = contexts
        self.clients, self.rows_per_tx = clients, rows_per_tx
        self.duration_s, self.warmup_s = duration_s, warmup_s
        self.identity = identity
        self.connect_timeout_s = connect_timeout_s
        self.applied: dict[str, str] = {}  # system-level values in force now
        self.baseline_system: dict[str, str] = {}

    async def apply_system(self, wanted: dict[str, str]) -> None:
        changed = {k: v for k, v in wanted.items() if self.applied.get(k) != v}
        if not changed:
            return
        conn = await connect(self.dsn, timeout_s=self.connect_timeout_s)
        try:
            for name, value in changed.items():
                await self.journal.alter_system(conn, name, value, dsn=self.dsn, **self.identity)
            await conn.execute("SELECT pg_reload_conf()")
        finally:
            await conn.close()
        if any(self.contexts[k] == "postmaster" for k in changed):
            if self.restart is None:
                raise TunerError("a restart-level WAL setting needs [target] restart_command")
            await self.restart()
        self.applied.update(changed)

    async def __call__(
        self, config: dict[str, Any], *, phase: Literal["search", "confirm"] = "search",
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
                                    warmup_s=self.warmup_s, settings=session, connect_timeout_s=self.connect_timeout_s)
        except (TunerError, asyncpg.PostgresError, OSError, asyncpg.InterfaceError) as exc:
            return self._trial(config, None, "failed", phase, arm, {}, f"{type(exc).__name__}: {exc}", started, t0)
        if res.transactions == 0:
            return self._trial(config, None, "failed", phase, arm, res.metrics(),
                               f"no transaction committed ({res.errors} errors)", started, t0)
        return self._trial(config, res.ms_per_tx, "ok", phase, arm, res.metrics(), None, started, t0)

    def _trial(self, config: dict[str, Any], value: float | None, status: Literal["ok", "failed", "rejected"],
               phase: Literal["search", "confirm"], arm: Literal["baseline", "candidate"] | None,
               metrics: dict[str, float], reason: str | None, started: datetime, t0: float) -> Trial:
        t = Trial(config=dict(config), value=value, status=status, phase=phase, arm=arm, reason=reason,
                  started_at=started, duration_s=round(time.monotonic() - t0, 3), metrics=metrics)
        log.info("probe", family=FAMILY, phase=phase, arm=arm, config=config, status=status,
                 ms_per_tx=None if value is None else round(value, 3), tps=metrics.get("tps"),
                 insert_wait=metrics.get("wal_insert_wait_share"), reason=reason, duration_s=t.duration_s)
        return t


def _test(policy: Policy) -> SequentialTest:
    return SequentialTest(min_pairs=policy.budget.confirm_min_pairs, max_pairs=policy.budget.confirm_max_pairs,
                          alpha=policy.decision.alpha, min_effect=policy.decision.min_effect)


async def run(
    cfg: Config, policy: Policy, dsn: str | None, restart: Callable[[], Awaitable[None]] | None, journal: Journal,
    *, budget: int | None, progress: Progress, sandbox_dir: str | None = None,
) -> WalResult:
    def skipped(reason: str) -> WalResult:
        return WalResult(FamilyOutcome(family=FAMILY, status="skipped", reason=reason))

    conn = await connect(dsn, timeout_s=cfg.target.connect_timeout_s)
    try:
        facts = await gather(conn)
        if facts.in_recovery:
            return skipped("WAL probes need writes, and the target is a hot standby: point tuner at a writable "
                           f"clone marked {interlock.MARKER} = '{interlock.MARKER_VALUE}'")
        try:
            interlock.check(facts, client_sets_marker=sets_marker_from_client(dsn))
        except RefusedError as exc:
            return skipped(f"{exc}")
        if not facts.is_superuser:
            return skipped("WAL probes need a superuser (commit_delay and wal_compression are superuser settings, "
                           "ALTER SYSTEM too)")
        rows = await conn.fetch(
            "SELECT name, setting, context, vartype, enumvals, source FROM pg_settings WHERE name = ANY($1::text[])",
            [*catalog.load().names("wal"), COMPRESSION])
        settings = {r["name"]: dict(r) for r in rows}
        await walload.prepare(conn)
        identity = {"system_identifier": facts.system_identifier, "port": int(await conn.fetchval("SHOW port")),
                    "sandbox_dir": sandbox_dir}
    finally:
        await conn.close()

    wp = policy.wal
    if restart is not None and not policy.guardrails.allow_restart:
        restart = None
    knobs = [k for k in policy.search if (s := catalog.load().spec(k, facts.server_version_num)) and s.family == "wal"
             and k in settings and k != BUFFERS]
    contexts = {k: settings[k]["context"] for k in settings}
    probe = WalProbe(dsn=dsn, journal=journal, restart=restart, contexts=contexts, clients=wp.clients,
                     rows_per_tx=wp.rows_per_tx, duration_s=wp.duration_s, warmup_s=wp.warmup_s, identity=identity,
                     connect_timeout_s=cfg.target.connect_timeout_s)
    result = WalResult(FamilyOutcome(family=FAMILY, status="done", reason=""))
    current = {k: int(settings[k]["setting"]) for k in knobs}
    recommended: dict[str, Any] = dict(current)
    log.info("plan", family=FAMILY, knobs=knobs, current=current, clients=wp.clients, rows_per_tx=wp.rows_per_tx,
             duration_s=wp.duration_s, insert_locks=INSERT_LOCKS)
    try:
        if knobs:
            dims = []
            for k in knobs:
                sp, ks = policy.search[k], catalog.load().spec(k, facts.server_version_num)
                assert ks is not None
                dims.append(Dimension(k, max(sp.min, ks.min or sp.min), min(sp.max, ks.max or sp.max), sp.scale))
            optimiser = build_optimiser(policy, dims, current, seed=cfg.tuner.seed, budget=budget)
            found = await search(optimiser, probe, max_consecutive_failures=policy.guardrails.max_failed_probes,
                                 progress=progress)
            result.trials.extend(found.trials)
            if found.recommendation is not None:
                cand = found.recommendation.config
                recs, adopted = await _decide(policy, probe, current, cand, found.recommendation.near_optimal,
                                              settings, result, progress)
                result.recommendations.extend(recs)
                recommended.update(adopted)
        # Screens: one alternative each, paired against today's value.
        comp = _compression_candidate(settings.get(COMPRESSION), wp.wal_compression)
        if comp is not None:
            recs, adopted = await _screen(policy, probe, COMPRESSION, settings[COMPRESSION]["setting"], comp,
                                          recommended, settings, result, progress, requires="reload")
            result.recommendations.extend(recs)
            recommended.update(adopted)
        if BUFFERS in settings and wp.wal_buffers:
            if restart is None:
                log.info("plan.skip", knob=BUFFERS, reason="restart-level: needs [target] restart_command and "
                         "guardrails.allow_restart")
            else:
                now = int(settings[BUFFERS]["setting"])
                cand_b = next((b for b in wp.wal_buffers if b != now), None)
                if cand_b is not None:
                    recs, adopted = await _screen(policy, probe, BUFFERS, now, cand_b, recommended, settings,
                                                  result, progress, requires="restart")
                    result.recommendations.extend(recs)
                    recommended.update(adopted)
        await _scaling(probe, policy, current_cfg(settings, recommended, knobs), recommended, result, progress)
    finally:
        result.restored = await _put_back(probe, journal, dsn, restart, cfg.target.connect_timeout_s)
    result.summary = _summary(result.contention, facts.major)
    where = "the sandbox's primary (tuner's own, marked staging)" if sandbox_dir else f"{redact(dsn)} ({facts.server_version})"
    result.outcome = FamilyOutcome(family=FAMILY, status="done",
                                   reason=f"searched, confirmed and measured the scaling curve on {where}",
                                   workload=[f"{wp.clients} clients x INSERT of {wp.rows_per_tx} rows per transaction "
                                             f"into {walload.TABLE}, {wp.duration_s:g} s per probe"],
                                   optimiser="bayesian" if knobs else None)
    return result


def current_cfg(settings: dict[str, dict[str, Any]], recommended: dict[str, Any], knobs: list[str]) -> dict[str, Any]:
    """Today's values of every knob the scaling curve compares."""
    return {k: (settings[k]["setting"] if k == COMPRESSION else int(settings[k]["setting"])) for k in recommended}


async def _decide(
    policy: Policy, probe: WalProbe, current: dict[str, int], cand: dict[str, int], near: dict[str, tuple[int, int]],
    settings: dict[str, dict[str, Any]], result: WalResult, progress: Progress,
) -> tuple[list[RecommendationOut], dict[str, Any]]:
    look, failure = None, None
    test = _test(policy)
    if cand != current:
        checked = await confirm(current, cand, probe, test, progress=progress)
        result.trials.extend(checked.trials)
        look, failure = checked.look, checked.failure
    recs = []
    adopted: dict[str, Any] = {}
    for k in current:
        if cand[k] == current[k]:
            decision, reason, effect = "keep", "today's value is in the model's predicted optimum", None
        elif look is None:
            decision, reason, effect = "keep", f"confirmation could not finish: {failure}", None
        else:
            decision = "change" if look.verdict == "change" else "keep"
            reason, effect = look.reason, effect_out(look, test, metric=METRIC)
        if decision == "change":
            adopted[k] = cand[k]
        recs.append(_rec(k, current[k], cand[k], near.get(k), decision, reason, effect, settings[k],
                         together=[o for o in current if o != k and cand[o] != current[o]] if decision == "change" else []))
    return recs, adopted


async def _screen(
    policy: Policy, probe: WalProbe, knob: str, now: Any, alt: Any, base: dict[str, Any],
    settings: dict[str, dict[str, Any]], result: WalResult, progress: Progress, *, requires: str,
) -> tuple[list[RecommendationOut], dict[str, Any]]:
    test = _test(policy)
    a, b = {**base, knob: now}, {**base, knob: alt}
    checked = await confirm(a, b, probe, test, progress=progress)
    result.trials.extend(checked.trials)
    if checked.look is None:
        rec = _rec(knob, now, alt, None, "keep", f"confirmation could not finish: {checked.failure}", None, settings[knob])
        return [rec], {}
    decision = "change" if checked.look.verdict == "change" else "keep"
    rec = _rec(knob, now, alt, None, decision, checked.look.reason, effect_out(checked.look, test, metric=METRIC),
               settings[knob], requires=requires)
    return [rec], ({knob: alt} if decision == "change" else {})


def _rec(knob: str, current: Any, recommended: Any, near: tuple[int, int] | None, decision: str, reason: str,
         effect: Any, setting: dict[str, Any], *, together: list[str] | None = None,
         requires: str | None = None) -> RecommendationOut:
    change = decision == "change"
    needs = requires or ("restart" if setting["context"] == "postmaster" else "reload")
    return RecommendationOut(
        knob=knob, scope="system", object=None, current=current, recommended=recommended, near_optimal=near,
        decision=decision,  # type: ignore[arg-type]
        reason=reason, effect=effect, requires=needs,  # type: ignore[arg-type]
        apply_sql=sql_emit.alter_system(knob, recommended) if change else None,
        rollback_sql=sql_emit.rollback_system(knob, current, setting["source"]) if change else None,
        together_with=together or [],
    )


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
    wp = policy.wal
    differs = recommended != today
    progress.phase("wal scaling", len(wp.scaling_clients) * len(wp.scaling_rows_per_tx) * (2 if differs else 1))
    for rows in wp.scaling_rows_per_tx:
        for n in wp.scaling_clients:
            cur = await probe(today, clients=n, rows_per_tx=rows)
            result.trials.append(cur)
            progress.advance(f"{n} clients x {rows} rows: {cur.metrics.get('tps', 0):.0f} TPS")
            rec = None
            if differs:
                rec = await probe(recommended, clients=n, rows_per_tx=rows)
                result.trials.append(rec)
            m = cur.metrics
            result.contention.append(WalContentionOut(
                clients=n, rows_per_tx=rows, tps=m.get("tps"),
                wal_insert_wait_share=m.get("wal_insert_wait_share"), wal_write_wait_share=m.get("wal_write_wait_share"),
                wal_sync_wait_share=m.get("wal_sync_wait_share"),
                wal_buf_mapping_wait_share=m.get("wal_buf_mapping_wait_share"),
                p95_latency_ms=m.get("p95_latency_ms"),
            ))
            result.scaling.append(WalScalingOut(
                clients=n, rows_per_tx=rows, tps_current=m.get("tps") if cur.status == "ok" else None,
                tps_recommended=(rec.metrics.get("tps") if rec is not None and rec.status == "ok" else None),
            ))


async def _put_back(probe: WalProbe, journal: Journal, dsn: str | None,
                    restart: Callable[[], Awaitable[None]] | None, timeout_s: float) -> list[str]:
    """postgresql.auto.conf exactly as it was, reloaded (restarted if a restart-level knob was probed); the
    scratch schema dropped."""
    conn = await connect(dsn, timeout_s=timeout_s)
    try:
        restored = await journal.restore_system(conn)
        await conn.execute("SELECT pg_reload_conf()")
        await walload.drop(conn)
    finally:
        await conn.close()
    for r in restored:
        log.info("restored", detail=r.sentence())
    if any(probe.contexts.get(r.name) == "postmaster" and r.action == "restored" for r in restored) and restart:
        await restart()
    return [r.sentence() for r in restored]


def _summary(contention: list[WalContentionOut], major: int) -> str | None:
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
