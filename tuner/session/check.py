"""``tuner check``: everything a session would decide before its first probe, decided by the code the session runs
(:mod:`tuner.session.endpoints` for the connection, the facts and the interlock; :func:`tuner.families.base.why_skipped`
for each family; the families' ``preflight`` hooks for their workloads, the OS cache method, device access and the
asynchronous-I/O screening) — and nothing changed: read-only queries and file-system tests, no probe, no cache
emptied, no setting, journal or store written."""

from __future__ import annotations

import math
import os
import shlex
import shutil
import time
from collections.abc import Iterable

from tuner.actuate import Journal, SysfsWriter
from tuner.settings.config import Config, state_dir
from tuner.core.progress import NullProgress
from tuner.session.endpoints import clear, endpoint, learn
from tuner.errors import ProbeError, RefusedError, TunerError
from tuner.families import REGISTRY
from tuner.families.base import Endpoint, Family, FamilyContext, why_skipped
from tuner.log import get_logger
from tuner.settings.policy import Policy
from tuner.report.preflight import LIVE_SESSION, Check, ColdStart, Estimate, FamilyPlan, Grant, Preflight
from tuner.probes import statements
from tuner.probes.cache import CacheControl, Eviction, can_drop_caches, eviction
from tuner.target import privileges
from tuner.target.connection import connect
from tuner import redact
from tuner.target.facts import TargetFacts
from tuner.target.server import Servers, servers


# The one answer every example gives: through the server's own unit, never pg_ctl (see _restart).
RESTART_EXAMPLE = "systemctl restart postgresql@15-main"

log = get_logger("tuner.check")
# Cold starts timed by --time-restart, averaged: one restart on a shared host varied 0.4-0.9 s, and the estimate
# multiplies it by every cold probe of the session.
COLD_SAMPLES = 2
TIMED_NOTE = ("tuner check restarted the target twice and emptied the page cache twice, to time them (--time-restart); "
              "otherwise it ran read-only queries and changed no setting, file, journal or store")
SANDBOX_NOTE = ("tuner check created its own sandbox for the check and removed it; it ran read-only queries there "
                "and changed nothing on the host")
SANDBOX_TIMED_NOTE = ("tuner check created its own sandbox for the check and removed it; it restarted the sandbox's "
                      "standby and emptied the OS page cache twice each, to time them, and otherwise ran read-only "
                      "queries")


async def run(cfg: Config, policy: Policy, *, use_sandbox: bool, families: Iterable[str],
              budget: int | None = None, time_cold: bool = False) -> Preflight:
    """Check the configured target (or a sandbox, created and removed as a session would) for a session over
    ``families``. A refusal by the interlock is a failed check in the result, not an exception. ``time_cold``
    (always, on the check's own sandbox): restart the target once and empty the page cache once, timed, as a
    session does before every cold probe."""
    chosen = REGISTRY.ordered(tuple(families))
    writes = any(f.needs.writable for f in chosen)
    async with servers(cfg, use_sandbox=use_sandbox, progress=NullProgress(), writable=writes) as where:
        return await _check(cfg, policy, where, chosen, use_sandbox=use_sandbox, budget=budget, writes=writes,
                            time_cold=time_cold or use_sandbox)


async def _check(cfg: Config, policy: Policy, where: Servers, chosen: list[Family], *, use_sandbox: bool,
                 budget: int | None, writes: bool, time_cold: bool) -> Preflight:
    started = time.monotonic()
    label = "sandbox (created for the check, then removed)" if use_sandbox else " ".join(redact.dsn(where.dsn).split())
    facts = await learn(cfg, where.dsn)
    checks = [_connection(facts)]
    missing = await _privileges(cfg, where.dsn, facts)
    allow = policy.guardrails.allow_restart
    try:
        target, clearance = clear(cfg, where.dsn, facts, where.restart if allow else None, writable=False,
                                  sandbox=use_sandbox)
    except RefusedError as exc:
        checks.append(Check(name="interlock", status="fail", detail=str(exc), fix=exc.hint))
        stopped = [FamilyPlan(family=f.name, runs=False, reason="the interlock refused the target: a session stops "
                              "before it probes anything") for f in chosen]
        return Preflight(target=label, server_version=facts.server_version, mode=None, checks=checks,
                         families=stopped, missing=missing or [], estimate=None)
    assert clearance is not None
    checks.append(Check(name="interlock", status="ok", detail=clearance.reason))
    writable: Endpoint | None = None
    if writes:
        writable, _ = await endpoint(cfg, where.writable_dsn, where.writable_restart if allow else None,
                                     writable=True, sandbox=use_sandbox)
        checks.append(Check(name="writable server", status="skip" if writable.refusal else "ok",
                            detail=writable.refusal or "cleared for the families that write (journaled, put back)"))
    journal = Journal(state_dir(cfg), writer=SysfsWriter(cfg.readahead.helper_command))
    checks += host_checks(cfg, policy, facts, journal, sandbox=use_sandbox)
    buffers, evict = await _buffers(facts, target)
    checks.append(buffers)
    if cfg.workload.queries_from == "pg_stat_statements":
        checks.append(await _statements(cfg, target))
    # Before the families' timed runs, so that the first of them reads from disk as a probe does.
    try:
        cold = await _cold_start(facts, target, evict, timed=time_cold)
    except TunerError as exc:  # the restart command failed: what a session's first probe would meet too
        cold = ColdStart(restart=target.restart is not None and evict is None, drop=False)
        checks.append(Check(name="cold start", status="warn", detail=f"timing a restart and a page-cache drop: "
                            f"{exc}; a session's cold probes would fail the same way",
                            fix=exc.hint or "fix [target] restart_command"))
    ctx = FamilyContext(cfg=cfg, policy=policy, target=target, writable=writable, journal=journal,
                        progress=NullProgress(), budget=budget, sandbox=use_sandbox, own_devices=where.own_devices,
                        sandbox_dir=where.sandbox_dir)
    plans = []
    for family in chosen:
        why_not = why_skipped(family, ctx)
        plans.append(FamilyPlan(family=family.name, runs=False, reason=why_not) if why_not
                     else await family.preflight(ctx))
    timed = cold.seconds is not None
    note = ((SANDBOX_TIMED_NOTE if timed else SANDBOX_NOTE) if use_sandbox else TIMED_NOTE if timed else None)
    return Preflight(target=label, server_version=facts.server_version, mode=clearance.mode, checks=checks,
                     families=plans, missing=missing or [], estimate=estimate(policy, budget, plans, cold,
                                                                        setup_s=_setup_s(started, cold)),
                     **({"changed_nothing": note} if note else {}))


def _connection(facts: TargetFacts) -> Check:
    who = f"role {facts.user}{' (superuser)' if facts.is_superuser else ''}"
    return Check(name="connection", status="ok",
                 detail=f"PostgreSQL {facts.server_version}, database {facts.database}, {who}")


async def _privileges(cfg: Config, dsn: str | None, facts: TargetFacts) -> list[Grant] | None:
    conn = await connect(dsn, timeout_s=cfg.target.connect_timeout_s)
    try:
        return await privileges.check(conn, facts, statements=cfg.workload.queries_from == "pg_stat_statements")
    finally:
        await conn.close()


async def _statements(cfg: Config, target: Endpoint) -> Check:
    """[workload] from = "pg_stat_statements": whether the extension is there and readable, and what it holds."""
    conn = await target.connect()
    try:
        ranked, by_time, where = await statements.read_ranking(conn, cfg.workload,
                                                               connect_timeout_s=cfg.target.connect_timeout_s)
    except ProbeError as exc:
        # the read-path families are skipped with this reason; the session itself runs
        return Check(name="pg_stat_statements", status="skip", detail=str(exc), fix=exc.hint)
    finally:
        await conn.close()
    hidden = sum(1 for r in ranked if r.statement.queryid is None)
    detail = (f"read on {where}: {len(ranked)} statement(s) of this database with the most read I/O, ranked by "
              f"{'read time (track_io_timing)' if by_time else 'blocks read (track_io_timing was off)'}"
              + ("; other roles' statements are hidden from this role" if hidden else "")
              + "; tuner workload show lists them")
    if not ranked:
        return Check(name="pg_stat_statements", status="warn", detail=f"read on {where}: it holds no statement "
                     "of this database yet", fix="run the application's workload on the target first")
    return Check(name="pg_stat_statements", status="warn" if hidden or not by_time else "ok", detail=detail,
                 fix="GRANT pg_read_all_stats TO the role tuner connects as" if hidden
                 else None if by_time else "track_io_timing = on, to rank by read time")


def host_checks(cfg: Config, policy: Policy, facts: TargetFacts, journal: Journal, *, sandbox: bool) -> list[Check]:
    """The host's part: is tuner on the staging host, may it restart the server and empty the page cache, does a
    journal wait to be put back; and what a role without superuser loses."""
    local = facts.local_data_directory()
    out = [Check(name="staging host", status="ok", detail=f"tuner runs on the server's host (data directory {local})")
           if local else
           Check(name="staging host", status="warn", detail="the server's data directory was not found here with its "
                 "system identifier: families that read its files or empty its caches are skipped",
                 fix="run tuner on the staging server's host (as root), with the privileges below")]
    out.append(Check(name="superuser", status="ok", detail="the role is a superuser") if facts.is_superuser else
               Check(name="superuser", status="warn", detail="not a superuser: pg_buffercache eviction, ALTER SYSTEM "
                     "on the server-wide knobs and the families that write are not available",
                     fix="nothing to grant: these need a superuser (or a staging clone where tuner may have one)"))
    out.append(_restart(cfg, policy, sandbox=sandbox))
    if local is None:
        out.append(Check(name="OS page cache", status="skip", detail="not on the staging host"))
    elif can_drop_caches():
        out.append(Check(name="OS page cache", status="ok", detail="emptied with /proc/sys/vm/drop_caches (root)"))
    else:
        out.append(Check(name="OS page cache", status="warn", detail="not root: emptied with posix_fadvise(DONTNEED) "
                         "on the probed relation files, where this user may read them", fix="run tuner as root"))
    if (holder := journal.live_holder()) is not None:
        # Its journal is a live session's own, not one left behind: `tuner restore` would be refused too.
        out.append(Check(name=LIVE_SESSION, status="warn", detail=f"a live session ({holder}) holds the state "
                         f"directory {journal.state_dir}: a new session is refused until it ends (it puts back its "
                         "own changes)", fix="wait for it to end, or stop it with kill -TERM <pid>"))
    elif journal.path.exists():
        out.append(Check(name="journal", status="warn", detail=f"{journal.path} holds changes an earlier session "
                         "left: a session puts them back first", fix="tuner restore (puts them back now)"))
    return out


def _restart(cfg: Config, policy: Policy, *, sandbox: bool) -> Check:
    if not policy.guardrails.allow_restart:
        return Check(name="restart", status="warn", detail="the policy does not allow restarts "
                     "(guardrails.allow_restart): restart-level settings are not screened")
    if sandbox:
        return Check(name="restart", status="ok", detail="tuner restarts its own sandbox")
    command = cfg.target.restart_command
    if not command:
        return Check(name="restart", status="warn", detail="no [target] restart_command: shared buffers are emptied "
                     "only by pg_buffercache eviction, and restart-level settings are not screened",
                     fix=f"set [target] restart_command, e.g. '{RESTART_EXAMPLE}'")
    try:
        program = shlex.split(command)[0]
    except (ValueError, IndexError):
        program = command
    if os.path.basename(program) == "pg_ctl":
        return Check(name="restart", status="warn", detail="[target] restart_command runs pg_ctl: under systemd the "
                     "server it starts lives in tuner's own unit, with its restrictions, and stops with it",
                     fix=f"restart through the server's own unit, e.g. '{RESTART_EXAMPLE}'")
    found = shutil.which(program) or (os.sep in program and os.access(program, os.X_OK))
    if not found:
        return Check(name="restart", status="warn", detail=f"[target] restart_command runs {program}, which is not "
                     "found or not executable here", fix="give the command's full path")
    return Check(name="restart", status="ok", detail=f"[target] restart_command: {command} (not run by the check)")


async def _buffers(facts: TargetFacts, target: Endpoint) -> tuple[Check, Eviction | None]:
    evict, why_not = await eviction(facts, [None], target.connect)
    if evict is not None:
        return Check(name="shared buffers", status="ok",
                     detail=f"emptied with {evict.function} (pg_buffercache)"), evict
    if target.restart is not None:
        return Check(name="shared buffers", status="ok", detail=f"emptied by a restart ({why_not})"), None
    return Check(name="shared buffers", status="warn", detail=f"not emptied between probes ({why_not}); probes "
                 "that find their blocks cached are rejected",
                 fix="on 17+ install pg_buffercache (a superuser probes), or set [target] restart_command"), None


async def _cold_start(facts: TargetFacts, target: Endpoint, evict: Eviction | None, *, timed: bool) -> ColdStart:
    """What each cold probe will cost besides its queries: a restart where shared buffers cannot be evicted, a
    drop_caches where tuner may write it — run and timed here when ``timed`` (:data:`COLD_SAMPLES` of each,
    averaged), with the session's own
    code (:meth:`CacheControl.make_cold`), through the target's guard (it re-checks the interlock after the
    restart). Eviction is left out: it touches the probed relations only and takes milliseconds."""
    restart = evict is None and target.restart is not None
    drop = facts.local_data_directory() is not None and can_drop_caches()
    if not timed or not (restart or drop):
        return ColdStart(restart=restart, drop=drop)
    cache = CacheControl(restart=target.restart if restart else None, os_method="drop_caches" if drop else "none")
    took = []
    for _ in range(COLD_SAMPLES):
        started = time.monotonic()
        await cache.make_cold()
        conn = await target.connect()  # a probe's first connection after it: the server's first after a restart
        await conn.close()
        took.append(time.monotonic() - started)
    log.info("check.cold_start", seconds=[round(t, 3) for t in took])
    return ColdStart(restart=restart, drop=drop, seconds=round(sum(took) / len(took), 3))


def _setup_s(started: float, cold: ColdStart) -> float:
    """What a session spends before its probes, as this check spent it: connecting, the facts, the interlock, each
    family's plan and timed run — the check's own time so far, without the cold starts it timed."""
    return max(0.0, time.monotonic() - started - COLD_SAMPLES * (cold.seconds or 0.0))


def estimate(policy: Policy, budget: int | None, plans: list[FamilyPlan],
             cold: ColdStart | None = None, *, setup_s: float = 0.0) -> Estimate | None:
    """The session's size from the policy's budgets, per family that runs; the restarts and page-cache drops its
    cold probes make (``cold``); and its duration from each family's measured (or, for a generated load,
    configured) probe time plus, for a cold probe, the restart and drop as timed on the target; pure."""
    running = [p for p in plans if p.runs]
    if not running:
        return None
    cold = cold or ColdStart(restart=False, drop=False)
    b = policy.budget
    search = (min(b.min_probes, budget or b.probes), budget or b.probes)
    confirm = (2 * b.confirm_min_pairs, 2 * b.confirm_max_pairs)
    per_family = (search[0] + confirm[0], search[1] + confirm[1])
    timed = [p.probe_s for p in running if p.probe_s is not None]
    n_cold = sum(p.cold for p in running)
    each = cold.seconds or 0.0  # a cold probe's restart and drop, as timed here
    low: float | None = None
    high: float | None = None
    likely: float | None = None
    if timed:
        fallback = max(timed)  # a family without a time of its own: the slowest measured
        seconds = [(p.probe_s if p.probe_s is not None else fallback) + (each if p.cold else 0.0) for p in running]
        # Milliseconds: a warm probe of small data takes a few, and rounding to tenths made a quiet machine's
        # estimate read "0 s" (17 probes x 2 ms).
        low = round(setup_s + sum(per_family[0] * s for s in seconds), 3)
        high = round(setup_s + sum(per_family[1] * s for s in seconds), 3)
        likely = round(math.sqrt(low * high), 3)
    untimed = (cold.restart or cold.drop) and cold.seconds is None
    how = (f"per family: {search[0]}-{search[1]} search probes ({'--budget' if budget else '[budget] min_probes-probes'}"
           f") and {confirm[0]}-{confirm[1]} confirmation trials ([budget] confirm_min_pairs-confirm_max_pairs, two "
           "trials a pair); a joint search or a later stage (io_workers, io_method, scaling runs) adds more. Time per "
           "probe: one read-only run of the family's workload in this check (a generated load: its policy's "
           "duration; a family with neither: the slowest of those)"
           + (f", plus a restart and page-cache drop as timed on the target ({each:.2f} s) before each cold probe"
              if cold.seconds is not None else "")
           + (f"; before the probes, what this check took to connect, learn and plan ({setup_s:.1f} s)"
              if setup_s else "")
           + ("; the restarts and cache drops are not timed (tuner check --time-restart restarts the target to "
              "time them), so the time is a lower bound" if untimed else "")
           + ("" if timed else "; no workload could be timed"))
    cold_low, cold_high = n_cold * per_family[0], n_cold * per_family[1]
    return Estimate(probes_low=len(running) * per_family[0], probes_high=len(running) * per_family[1],
                    duration_low_s=low, duration_high_s=high, how=how,
                    restarts_low=cold_low if cold.restart else 0, restarts_high=cold_high if cold.restart else 0,
                    drops_low=cold_low if cold.drop else 0, drops_high=cold_high if cold.drop else 0,
                    cold_start_s=cold.seconds, duration_s=likely)
