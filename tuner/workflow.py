"""``tuner recommend`` from start to end: target → interlock → plan → search → confirm → report."""

from __future__ import annotations

import asyncio
import platform
import socket
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from tuner.config import Config, state_dir
from tuner.errors import ProbeError, TunerError
from tuner.families import readahead, wal
from tuner.actuate import Journal, SysfsWriter
from tuner.knobs import catalog
from tuner.log import get_logger
from tuner.model import DeviceOut, FamilyOutcome, RecommendationOut, Report, SessionOut, TargetOut, Trial
from tuner.optimiser import Dimension
from tuner.policy import Policy
from tuner.probes import workload
from tuner.probes.cache import CacheControl, choose_os_method
from tuner.probes.runner import ColdProbe
from tuner.recommend import sql as sql_emit
from tuner.session import NullProgress, Progress, build_optimiser, confirm, effect_out, search
from tuner.stats import SequentialTest
from tuner.target import interlock
from tuner.target.connection import connect, redact, sets_marker_from_client
from tuner.target.facts import TargetFacts, gather
from tuner.target.sandbox import Sandbox

log = get_logger("tuner.workflow")

CONCURRENCY_KNOB = "effective_io_concurrency"


def _restart_command(command: str) -> Callable[[], Awaitable[None]]:
    async def restart() -> None:
        # Output goes to a file, not a pipe, and the command runs in a session of its own: if tuner dies
        # mid-restart (SIGKILL), pg_ctl must not die of SIGPIPE between stopping and starting the server.
        with tempfile.TemporaryFile() as out:
            proc = await asyncio.create_subprocess_shell(
                command, stdin=asyncio.subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True
            )
            await asyncio.shield(proc.wait())
            out.seek(0)
            text = out.read().decode(errors="replace")
        if proc.returncode != 0:
            detail = text.strip().splitlines()
            raise TunerError(f"restart_command failed: {detail[-1] if detail else 'exit ' + str(proc.returncode)}")

    return restart


@dataclass(frozen=True)
class _Target:
    dsn: str | None
    restart: Callable[[], Awaitable[None]] | None
    own_devices: frozenset[str] = frozenset()  # block devices that belong to tuner (a sandbox's loop device)
    # Where the wal family writes: the target itself, or in a sandbox its primary (marked staging).
    writable_dsn: str | None = None
    writable_restart: Callable[[], Awaitable[None]] | None = None
    sandbox_dir: str | None = None


@asynccontextmanager
async def _target(
    cfg: Config, *, use_sandbox: bool, progress: Progress, families: tuple[str, ...]
) -> AsyncIterator[_Target]:
    """The server to probe and how to restart it (None when it cannot be restarted)."""
    if not use_sandbox:
        restart = _restart_command(cfg.target.restart_command) if cfg.target.restart_command else None
        yield _Target(cfg.target.dsn, restart, writable_dsn=cfg.target.dsn, writable_restart=restart)
        return
    progress.phase("sandbox", None)
    sandbox = Sandbox(
        base_dir=cfg.sandbox.base_dir,
        scale=cfg.sandbox.scale,
        bin_dir=cfg.sandbox.bin_dir,
        keep=cfg.sandbox.keep,
        on_step=progress.advance,
        disk=cfg.sandbox.disk,
        staging_primary="wal" in families,
    )
    async with sandbox:
        yield _Target(
            sandbox.dsn("standby"), sandbox.restart_standby,
            own_devices=frozenset([sandbox.device] if sandbox.device else []),
            writable_dsn=sandbox.dsn("primary"), writable_restart=sandbox.restart_primary,
            sandbox_dir=str(sandbox.root),
        )


def _restore(journal: Journal, restored: list[str]) -> None:
    """Put back what the session changed. Synchronous, so it runs while a cancellation (SIGTERM) or Ctrl-C
    unwinds, too; a second call finds nothing left."""
    for r in journal.restore():
        log.info("restored", detail=r.sentence())
        restored.append(r.sentence())


async def recommend(
    cfg: Config,
    policy: Policy,
    *,
    use_sandbox: bool,
    families: tuple[str, ...],
    budget: int | None = None,
    progress: Progress | None = None,
) -> Report:
    progress = progress or NullProgress()
    started = datetime.now(UTC)
    t0 = time.monotonic()
    session_id = uuid.uuid4().hex[:12]
    trials: list[Trial] = []
    outcomes: list[FamilyOutcome] = []
    recs: list[RecommendationOut] = []
    devices: list[DeviceOut] = []
    wal_out: dict[str, Any] = {"contention": [], "scaling": [], "summary": None}

    # The journal first: whatever a crashed session left is put back before anything else happens.
    journal = Journal(state_dir(cfg), writer=SysfsWriter(cfg.readahead.helper_command))
    restored = [f"left by an earlier session: {r.sentence()}" for r in journal.open(session_id)]
    try:
        async with _target(cfg, use_sandbox=use_sandbox, progress=progress, families=families) as target:
            try:
                dsn, restart, own_devices = target.dsn, target.restart, target.own_devices
                if restart is not None and not policy.guardrails.allow_restart:
                    restart = None
                conn = await connect(dsn, timeout_s=cfg.target.connect_timeout_s)
                try:
                    facts = await gather(conn)
                    clearance = interlock.check(facts, client_sets_marker=sets_marker_from_client(dsn))
                    log.info(
                        "target", dsn=redact(dsn), server_version=facts.server_version, mode=clearance.mode,
                        reason=clearance.reason,
                    )
                    # readahead first: each device is put back when its probing ends, so the concurrency family then
                    # measures at today's readahead — the one its recommendation will run with.
                    for family in sorted(families, key=lambda f: f != "readahead"):
                        if conn.is_closed():  # a family's probes restarted the server
                            conn = await connect(dsn, timeout_s=cfg.target.connect_timeout_s)
                        if family == "readahead":
                            res = await readahead.run(cfg, policy, facts, conn, dsn, restart, journal,
                                                      budget=budget, progress=progress,
                                                      sandbox_devices=own_devices if use_sandbox else None)
                            outcome, fam_trials, fam_recs = res.outcome, res.trials, res.recommendations
                            devices.extend(res.devices)
                        elif family == "concurrency":
                            outcome, fam_trials, fam_recs = await _concurrency(
                                cfg, policy, facts, conn, dsn, restart, budget=budget, progress=progress
                            )
                        elif family == "wal":
                            w = await wal.run(cfg, policy, target.writable_dsn, target.writable_restart, journal,
                                              budget=budget, progress=progress, sandbox_dir=target.sandbox_dir)
                            outcome, fam_trials, fam_recs = w.outcome, w.trials, w.recommendations
                            wal_out.update(contention=w.contention, scaling=w.scaling, summary=w.summary)
                            restored.extend(w.restored)
                        else:  # pragma: no cover - config validation only admits known families
                            outcome, fam_trials, fam_recs = FamilyOutcome(family=family, status="skipped", reason="unknown family"), [], []
                        log.info("family", family=family, status=outcome.status, reason=outcome.reason)
                        outcomes.append(outcome)
                        trials.extend(fam_trials)
                        recs.extend(fam_recs)
                finally:
                    await conn.close()
            finally:
                # While the target still exists: a sandbox's loop device is detached when the sandbox closes,
                # and writing the journal's (attached-time) value after that would change a device nobody uses.
                _restore(journal, restored)
    finally:
        _restore(journal, restored)  # when the target never came up; a no-op otherwise
    cache_desc = "; ".join(f"{o.family}: {o.cache}" for o in outcomes if o.cache) or "no probes ran"

    return Report(
        target=TargetOut(
            server_version_num=facts.server_version_num,
            server_version=facts.server_version,
            in_recovery=facts.in_recovery,
            system_identifier=facts.system_identifier,
            mode=clearance.mode,
            dsn=redact(dsn) if not use_sandbox else "sandbox (removed)",
            sandbox=use_sandbox,
        ),
        session=SessionOut(
            id=session_id,
            started_at=started,
            duration_s=round(time.monotonic() - t0, 1),
            probes=len(trials),
            policy=policy.policy.name,
            seed=cfg.tuner.seed,
            cache=cache_desc,
            host=socket.gethostname(),
            kernel=platform.release(),
        ),
        families=outcomes,
        recommendations=recs,
        devices=devices,
        restored=restored,
        wal_contention=wal_out["contention"],
        wal_scaling=wal_out["scaling"],
        wal_summary=wal_out["summary"],
        trials=trials,
    )


async def _concurrency(
    cfg: Config,
    policy: Policy,
    facts: TargetFacts,
    conn: object,
    dsn: str | None,
    restart: Callable[[], Awaitable[None]] | None,
    *,
    budget: int | None,
    progress: Progress,
) -> tuple[FamilyOutcome, list[Trial], list[RecommendationOut]]:
    family = "concurrency"
    spec = catalog.load().spec(CONCURRENCY_KNOB, facts.server_version_num)
    search_spec = policy.search.get(CONCURRENCY_KNOB)
    if spec is None or search_spec is None:
        why = "the server has no effective_io_concurrency" if spec is None else "the policy does not search effective_io_concurrency"
        return FamilyOutcome(family=family, status="skipped", reason=why), [], []
    setting = facts.settings.get(CONCURRENCY_KNOB)
    if setting is not None and setting.max_val == "0":
        return FamilyOutcome(family=family, status="skipped", reason="this server build has no prefetch support (range 0..0)"), [], []
    ignored = sorted(
        k for k in policy.search
        if k != CONCURRENCY_KNOB and (spec_k := catalog.load().spec(k, facts.server_version_num)) and spec_k.family == "concurrency"
    )
    if ignored:
        log.warning("plan.knobs_not_probed", knobs=ignored, reason="no workload for them in the concurrency family yet")

    try:
        queries = await workload.plan(
            conn,  # type: ignore[arg-type]
            custom=cfg.workload.queries,
            relations=cfg.workload.relations,
            pages_fraction=cfg.workload.pages_fraction,
        )
    except ProbeError as exc:
        return FamilyOutcome(family=family, status="skipped", reason=f"{exc} ({exc.hint})" if exc.hint else str(exc)), [], []

    local = facts.local_data_directory()
    files = []
    if local is not None:
        for q in queries:
            if q.relation:
                files.extend(await workload.relation_files(conn, local, q.relation))  # type: ignore[arg-type]
    os_method = choose_os_method(local, files)
    if os_method == "none":
        reason = (
            "cold-cache probes need tuner on the target's host (its data directory was not found here)"
            if local is None
            else "cannot empty the OS page cache: run tuner as root, or as a user who can read the relation files"
        )
        return FamilyOutcome(family=family, status="skipped", reason=reason, workload=[q.sql for q in queries]), [], []
    if restart is None:
        log.warning(
            "plan.no_restart",
            detail="shared buffers are not emptied between probes; probes that find their blocks cached are rejected",
            hint="set [target] restart_command (and allow_restart in the policy)",
        )
    cache = CacheControl(restart=restart, os_method=os_method, files=files)
    probe = ColdProbe(
        dsn=dsn,
        queries=queries,
        cache=cache,
        statement_timeout_s=policy.guardrails.statement_timeout_s,
        min_cold_read_fraction=policy.cache.min_cold_read_fraction,
        require_bitmap=facts.server_version_num < 180000 or any(q.plan == "bitmap" for q in queries),
        connect_timeout_s=cfg.target.connect_timeout_s,
    )
    low = max(search_spec.min, spec.min or 0)
    high = min(search_spec.max, spec.max if spec.max is not None else search_spec.max)
    dim = Dimension(CONCURRENCY_KNOB, low, high, search_spec.scale)
    current = int(setting.setting) if setting is not None else int(spec.default)
    probes_budget = budget if budget is not None else policy.budget.probes
    # The same construction the optimiser benchmark measures (benchmarks/optimiser.py).
    optimiser = build_optimiser(policy, [dim], {CONCURRENCY_KNOB: current}, seed=cfg.tuner.seed, budget=probes_budget)
    log.info("plan", family=family, knob=CONCURRENCY_KNOB, range=[low, high], current=current,
             queries=[q.name for q in queries], cache=cache.describe(), budget=probes_budget)

    cache_desc = cache.describe()
    found = await search(optimiser, probe, max_consecutive_failures=policy.guardrails.max_failed_probes, progress=progress)
    trials = list(found.trials)
    workload_sql = [q.sql for q in queries]
    if found.recommendation is None:
        return FamilyOutcome(family=family, status="failed", reason=found.stop_reason, workload=workload_sql,
                             stop_reason=found.stop_reason, optimiser=optimiser.kind, cache=cache_desc), trials, []
    best = found.recommendation
    recommended = best.config[CONCURRENCY_KNOB]
    near = best.near_optimal.get(CONCURRENCY_KNOB)
    source = setting.source if setting is not None else "default"
    base: dict[str, Any] = dict(
        knob=CONCURRENCY_KNOB, scope="system", object=None, current=current, recommended=recommended,
        near_optimal=near, requires="reload",
    )
    if recommended == current:
        rec = RecommendationOut(
            **base, decision="keep", effect=None, apply_sql=None, rollback_sql=None,
            reason="today's value is the model's predicted optimum; nothing to confirm",
        )
        return FamilyOutcome(family=family, status="done", reason="search finished", workload=workload_sql,
                             stop_reason=found.stop_reason, optimiser=optimiser.kind, cache=cache_desc), trials, [rec]

    test = SequentialTest(
        min_pairs=policy.budget.confirm_min_pairs,
        max_pairs=policy.budget.confirm_max_pairs,
        alpha=policy.decision.alpha,
        min_effect=policy.decision.min_effect,
    )
    checked = await confirm({CONCURRENCY_KNOB: current}, {CONCURRENCY_KNOB: recommended}, probe, test, progress=progress)
    trials.extend(checked.trials)
    if checked.look is None:
        rec = RecommendationOut(
            **base, decision="keep", effect=None, apply_sql=None, rollback_sql=None,
            reason=f"confirmation could not finish: {checked.failure}",
        )
    else:
        decision: Literal["change", "keep"] = "change" if checked.look.verdict == "change" else "keep"
        rec = RecommendationOut(
            **base,
            decision=decision,
            effect=effect_out(checked.look, test),
            apply_sql=sql_emit.alter_system(CONCURRENCY_KNOB, recommended) if decision == "change" else None,
            rollback_sql=sql_emit.rollback_system(CONCURRENCY_KNOB, current, source) if decision == "change" else None,
            reason=checked.look.reason,
        )
    return FamilyOutcome(family=family, status="done", reason="search and confirmation finished", workload=workload_sql,
                         stop_reason=found.stop_reason, optimiser=optimiser.kind, cache=cache_desc), trials, [rec]

