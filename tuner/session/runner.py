"""One tuning session from start to end: journal → servers → facts → interlock → every chosen family in its
declared order → the report. Nothing here knows a family by name: families say what they need
(:class:`tuner.families.base.Needs`) and the registry orders them.
"""

from __future__ import annotations

import contextlib
import platform
import socket
import time
import uuid
from datetime import UTC, datetime
from collections.abc import Mapping
from typing import Any

from tuner.actuate import Journal, SysfsWriter
from tuner.settings.config import Config, state_dir
from tuner.core.regime import assess
from tuner.core.loops import NullProgress, Progress
from tuner.families import REGISTRY
from tuner.session.endpoints import endpoint
from tuner.families.base import FamilyContext, Pin, Registry, WarmStart, skipped, why_skipped
from tuner.log import get_logger
from tuner.report.model import (FamilyOutcome, LeftOutStatement, Recommendation, Report, ReportSection, SessionOut,
                                TargetOut, Trial)
from tuner.settings.policy import Policy
from tuner.report.validate import ReportError
from tuner.probes.diskstat import data_disk
from tuner.session.stop import STOP
from tuner.store import Store, StoreError, target_id
from tuner.store.backend import no_lock
from tuner.target.fingerprint import fingerprint, recommendation_key
from tuner import redact
from tuner.target.connection import server_address
from tuner.target.server import Servers, servers

log = get_logger("tuner.runner")


async def _accepted(store: Store | None, target: str) -> dict[str, Any]:
    """The recommendations in force on ``target`` (its store id), by recommendation key: what the plateau rule
    keeps where a search cannot tell it apart from its best. The history is a help, not a precondition: a store
    that cannot say leaves it empty."""
    if store is None:
        return {}
    try:
        return {recommendation_key(r.knob, r.object): r.recommended for _, r in await store.accepted.find(target)}
    except (StoreError, ReportError) as exc:  # a stored row tuner cannot use is not a reason to stop the session
        log.warning("accepted.unavailable", reason=str(exc))
        return {}


async def recommend(
    cfg: Config,
    policy: Policy,
    *,
    use_sandbox: bool,
    families: tuple[str, ...],
    budget: int | None = None,
    progress: Progress | None = None,
    registry: Registry = REGISTRY,
    store: Store | None = None,
    warm_start: bool = True,
    session_id: str | None = None,
    where: Servers | None = None,
    pins: Mapping[str, Pin] | None = None,
) -> Report:
    """Run one session over ``families`` and return its report; everything it changed is put back.

    With a ``store``, the session holds the store's lock on its target while it probes (two tuners sharing a
    PostgreSQL store never probe one server at once) and, with ``warm_start``, each family may start its search
    from the latest stored session on a matching target. Storing the report is the caller's job (after the
    report is out, so a store that went away cannot keep it from the operator).

    The daemon passes its own ``session_id`` (announced before the session starts), ``where`` (servers it keeps
    for its whole life, e.g. its sandbox) and ``pins``: per family, a stored recommendation to re-validate with
    paired trials instead of searching."""
    progress = progress or NullProgress()
    kept_sandbox = use_sandbox and where is not None
    started, t0, session_id = datetime.now(UTC), time.monotonic(), session_id or uuid.uuid4().hex[:12]
    chosen = registry.ordered(families)
    trials: list[Trial] = []
    outcomes: list[FamilyOutcome] = []
    left_out: list[LeftOutStatement] = []  # the workload's statements not replayed ([workload] from), and why
    recs: list[Recommendation] = []
    sections: dict[str, ReportSection] = {}

    # The journal first: whatever a crashed session left is put back before anything else happens.
    journal = Journal(state_dir(cfg), writer=SysfsWriter(cfg.readahead.helper_command))
    restored = [f"left by an earlier session: {r.sentence()}" for r in journal.open(session_id)]

    def put_back() -> None:
        # Synchronous, so it runs while a cancellation (SIGTERM) or Ctrl-C unwinds too; a second call finds nothing.
        for r in journal.restore():
            log.info("restored", detail=r.sentence())
            restored.append(r.sentence())

    writes = any(f.needs.writable for f in chosen)
    try:
        kept: contextlib.AbstractAsyncContextManager[Servers] = (
            contextlib.nullcontext(where) if where is not None
            else servers(cfg, use_sandbox=use_sandbox, progress=progress, writable=writes))
        async with kept as where, \
                contextlib.AsyncExitStack() as locks:
            # The store's lock on the server's address first, before tuner connects: a second tuner sharing the
            # store must not even connect while the first one restarts the server between probes. The lock on
            # its identity (system identifier + data directory) follows once the facts are in.
            address = server_address(where.dsn)
            near = (store.backend.lock_target(f"address {address}", " ".join(redact.dsn(where.dsn).split()))
                    if store else no_lock())
            try:
                await locks.enter_async_context(near)
                allow = policy.guardrails.allow_restart
                target, clearance = await endpoint(cfg, where.dsn, where.restart if allow else None, writable=False,
                                                    sandbox=use_sandbox)
                log.info("target", dsn=redact.dsn(where.dsn), server_version=target.facts.server_version,
                         mode=clearance.mode, reason=clearance.reason)
                writable = None
                if writes:
                    writable, _ = await endpoint(cfg, where.writable_dsn,
                                                  where.writable_restart if allow else None, writable=True,
                                                  sandbox=use_sandbox)
                label = (f"sandbox PostgreSQL {target.facts.major}" if use_sandbox
                         else " ".join(redact.dsn(where.dsn).split()))
                fp = fingerprint(target.facts, label=label)
                history = WarmStart(store, fp, session_id) if store and warm_start and cfg.store.warm_start else None
                # The data directory's device, read around every cold probe's scans (the report's I/O regime).
                disk, disk_note = data_disk(target.facts.local_data_directory(),
                                            [ts.location for ts in target.facts.tablespaces])
                log.info("disk", reading=disk_note)
                tid = target_id(target.facts.system_identifier, fp["data_directory"], label)
                ctx = FamilyContext(cfg=cfg, policy=policy, target=target, writable=writable, journal=journal,
                                    progress=progress, budget=budget, sandbox=use_sandbox,
                                    own_devices=where.own_devices, sandbox_dir=where.sandbox_dir, history=history,
                                    pins=dict(pins or {}), disk=disk, accepted=await _accepted(store, tid))
                busy = store.backend.lock_target(tid, label) if store else no_lock()
                async with busy:
                    for family in chosen:
                        STOP.check()
                        why_not = why_skipped(family, ctx)
                        result = skipped(family.name, why_not) if why_not else await family.run(ctx)
                        log.info("family", family=family.name, status=result.outcome.status,
                                 reason=result.outcome.reason)
                        outcomes.append(result.outcome)
                        trials.extend(t if t.family else t.model_copy(update={"family": family.name})
                                      for t in result.trials)
                        recs.extend(result.recommendations)
                        restored.extend(result.restored)
                        if result.section is not None:
                            sections[family.name] = result.section
                    STOP.check()  # a stop whose cancellation was lost in the last probe still stops the session
                    if ctx.selection is not None:
                        left_out = [LeftOutStatement(queryid=x.queryid, text=x.text, share=x.share, reason=x.reason)
                                    for x in ctx.selection.left_out]
            finally:
                # While the servers still exist: a sandbox's loop device is detached when the sandbox closes, and
                # writing the journal's (attached-time) value after that would change a device nobody uses.
                put_back()  # (the locks are released after this)
    finally:
        put_back()  # when the servers never came up; a no-op otherwise
    facts = target.facts
    profile = cfg.sandbox.device if use_sandbox else None
    return Report(
        target=TargetOut(
            server_version_num=facts.server_version_num, server_version=facts.server_version,
            in_recovery=facts.in_recovery, system_identifier=facts.system_identifier, mode=clearance.mode,
            dsn=redact.dsn(where.dsn) if not use_sandbox else "sandbox (the daemon's own)" if kept_sandbox else "sandbox (removed)",
            sandbox=use_sandbox,
            fingerprint=fp,
        ),
        session=SessionOut(
            id=session_id, started_at=started, duration_s=round(time.monotonic() - t0, 1), probes=len(trials),
            policy=policy.policy.name, seed=cfg.tuner.seed,
            cache="; ".join(f"{o.family}: {o.cache}" for o in outcomes if o.cache) or "no probes ran",
            host=socket.gethostname(), kernel=platform.release(),
        ),
        families=outcomes, recommendations=recs, restored=restored, trials=trials, sections=sections, left_out=left_out,
        min_effect=policy.decision.min_effect, alpha=policy.decision.alpha,
        device_profile=profile.described if profile is not None else None,
        workload=("pg_stat_statements" if cfg.workload.queries_from == "pg_stat_statements"
                  else "yours" if cfg.workload.queries else "generated"),
        io_regime=assess(trials, profile=profile, device=disk.name if disk else None,
                         today={r.knob: r.current for r in recs if r.scope in ("system", "device")},
                         absent=None if disk else disk_note),
    )
