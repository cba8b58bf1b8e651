"""Which of PostgreSQL 18's server-wide asynchronous-I/O settings the concurrency family may search on this target,
and why not where it may not: ``io_workers`` (reload) and ``io_method`` (restart) are changed with ALTER SYSTEM,
which tuner writes back only where its journal may; ``io_method = io_uring`` is screened only where nothing stops
the server from running it (:mod:`tuner.hostfacts.iouring`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tuner.fs import sqlfiles
from tuner.core import bounds
from tuner.hostfacts import iouring
from tuner.families.base import FamilyContext
from tuner.report.model import Trial
from tuner.optimiser import Dimension
from tuner.probes import workload
from tuner.sandbox.own import is_own_sandbox

WORKERS = "io_workers"
METHOD = "io_method"
POOL_MIN, POOL_MAX = "io_min_workers", "io_max_workers"  # 19+: the self-sizing pool that replaces io_workers
IO_SETTINGS = ("io_max_combine_limit", METHOD, WORKERS, "io_combine_limit", POOL_MIN, POOL_MAX, *iouring.SLOT_SETTINGS)


async def io_settings(conn: Any) -> dict[str, dict[str, Any]]:
    """The server's asynchronous-I/O settings (17+) by name, as pg_settings shows them (read-only)."""
    sql = sqlfiles.load(str(Path(workload.__file__).parent), "io_settings")
    return {r["name"]: dict(r) for r in await conn.fetch(sql, list(IO_SETTINGS))}


def alter_system_refusal(ctx: FamilyContext) -> str | None:
    """Why the server-wide knobs cannot be changed on this target (None: they can)."""
    facts = ctx.facts
    if not facts.is_superuser:
        return "they are changed with ALTER SYSTEM, which needs a superuser"
    if facts.in_recovery and not is_own_sandbox(facts.data_directory, ctx.sandbox_dir):
        return ("they are changed with ALTER SYSTEM, and tuner writes ALTER SYSTEM lines back only on its own sandbox "
                "or a writable clone marked staging, not on this hot standby")
    return None


def workers_dimension(ctx: FamilyContext, io: dict[str, dict[str, Any]], refusal: str | None,
                      notes: list[str]) -> Dimension | None:
    """io_workers' search range (19+: io_max_workers', where the policy searches it), or None (with a note saying
    why) where it is not searched."""
    if WORKERS not in io and POOL_MAX in io and WORKERS in ctx.policy.search:
        notes.append(f"{WORKERS} not searched: PostgreSQL {ctx.facts.major} has no {WORKERS} (removed in 19 by commit "
                     f"d1c01b7, \"aio: Adjust I/O worker pool automatically\"): the pool of I/O workers sizes itself "
                     f"between {POOL_MIN} = {io.get(POOL_MIN, {}).get('setting', '?')} and {POOL_MAX} = "
                     f"{io[POOL_MAX]['setting']}, and the policy's [search.{WORKERS}] does not apply")
    if POOL_MAX in io:
        return _under_worker(ctx, io, refusal, notes, POOL_MAX) if POOL_MAX in ctx.policy.search else None
    if WORKERS not in io or bounds.spec(WORKERS, ctx.facts) is None:
        return None
    return _under_worker(ctx, io, refusal, notes, WORKERS)


def _under_worker(ctx: FamilyContext, io: dict[str, dict[str, Any]], refusal: str | None, notes: list[str],
                  knob: str) -> Dimension | None:
    dim = bounds.dimension(knob, ctx.policy, ctx.facts)
    why = (dim if isinstance(dim, str) else refusal if refusal
           else f"it acts only under {METHOD} = worker, and today it is {io[METHOD]['setting']}"
           if io.get(METHOD, {}).get("setting") != "worker" else None)
    if why is not None:
        notes.append(f"{knob} not searched: {why}")
        return None
    assert not isinstance(dim, str)
    return dim


def pool_never_full(trials: list[Trial], io_max_workers: int) -> str | None:
    """19: why searching io_max_workers cannot matter here — the pool never grew to its maximum in ``trials`` (the
    most I/O workers seen right after each probe's scans), so no read ran synchronously for want of a worker — or
    None when it did grow to it (or nothing was seen)."""
    seen = [t.metrics["io_workers_running"] for t in trials if t.status == "ok" and "io_workers_running" in t.metrics]
    if not seen or max(seen) >= io_max_workers:
        return None
    return (f"{POOL_MAX} not searched: the I/O worker pool grew to at most {max(seen):.0f} of {POOL_MAX} = "
            f"{io_max_workers} workers over {len(seen)} probes, so no read waited for a worker it could not start")


def method_alternatives(ctx: FamilyContext, io: dict[str, dict[str, Any]], refusal: str | None,
                        notes: list[str]) -> list[str]:
    """The io_method values to screen against today's: the policy's, where the build offers them and (io_uring)
    nothing on this host stops the server from running it; none without restarts."""
    if METHOD not in io or bounds.spec(METHOD, ctx.facts) is None or not ctx.policy.section("concurrency").io_method:
        return []
    today = io[METHOD]["setting"]
    offered = tuple(io[METHOD]["enumvals"] or ())
    why = (refusal if refusal else
           "it needs a restart, and the policy does not allow restarts (guardrails.allow_restart)"
           if not ctx.policy.guardrails.allow_restart else
           "it needs a restart, and tuner cannot restart this server ([target] restart_command)"
           if ctx.target.restart is None else None)
    if why is not None:
        notes.append(f"{METHOD} not screened: {why}")
        return []
    out = []
    for m in ctx.policy.section("concurrency").io_method:
        if m == today:
            continue
        if m == "io_uring":
            local = ctx.facts.local_data_directory()
            facts = iouring.read_facts(offered, local or Path("/nonexistent"),
                                       {k: str(io[k]["setting"]) for k in iouring.SLOT_SETTINGS if k in io})
            if (stopped := iouring.blocker(facts)) is not None:
                notes.append(f"{METHOD} = io_uring not screened: {stopped}")
                continue
        elif m not in offered:
            notes.append(f"{METHOD} = {m} not screened: this build does not offer it (it offers {', '.join(offered)})")
            continue
        out.append(m)
    return out
