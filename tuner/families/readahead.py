"""The readahead family: each block device's ``read_ahead_kb``, searched jointly with
``effective_io_concurrency`` where both can be probed, confirmed in paired trials, and put back afterwards.

Per device under the target's directories (data directory, ``pg_wal``, tablespaces):

1. the relations that live on it: the largest is scanned sequentially (what readahead serves); where an
   uncorrelated index exists, a sparse bitmap heap scan joins it (what ``effective_io_concurrency`` serves), with
   the policy's weights;
2. the device's raw O_DIRECT read rate, for the scan's efficiency;
3. a search over ``read_ahead_kb`` (× ``effective_io_concurrency``): before each probe the journaled actuator sets
   the device's readahead, the server restarts (every file is opened again — the kernel copies readahead into a
   file when it is opened), the caches are emptied, and a fresh connection runs the workload;
4. ABBA confirmation of the winner against today's values; readahead is put back at once.

Only when tuner runs on the staging host (its ``pg_control`` carries the server's system identifier) and may
write the device's sysfs attribute (root, or ``[readahead] helper_command``).
"""

from __future__ import annotations

import statistics
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg

from tuner import sqlfiles
from tuner.config import Config
from tuner.actuate import Journal
from tuner.knobs import catalog
from tuner.knobs.devices import DeviceGroup, Placement, discover, postgres_paths, readahead_quantum_kb
from tuner.log import get_logger
from tuner.model import DeviceOut, FamilyOutcome, RecommendationOut, Trial
from tuner.optimiser import Dimension
from tuner.policy import Policy
from tuner.probes import workload
from tuner.probes.cache import CacheControl, choose_os_method
from tuner.probes.rawread import raw_read_mb_s
from tuner.probes.runner import ColdProbe
from tuner.recommend import host as host_emit
from tuner.recommend import sql as sql_emit
from tuner.session import Progress, build_optimiser, confirm, effect_out, search
from tuner.stats import SequentialTest
from tuner.target.facts import TargetFacts

log = get_logger("tuner.readahead")

FAMILY = "readahead"
RA = "read_ahead_kb"
EIC = "effective_io_concurrency"
_PROBES_SQL = str(Path(workload.__file__).parent)


@dataclass
class FamilyResult:
    outcome: FamilyOutcome
    trials: list[Trial] = field(default_factory=list)
    recommendations: list[RecommendationOut] = field(default_factory=list)
    devices: list[DeviceOut] = field(default_factory=list)


@dataclass(frozen=True)
class DevicePlan:
    group: DeviceGroup
    queries: list[workload.ProbeQuery]
    joint: bool
    why_not_joint: str | None
    files: list[Path]  # every file the probes read: evicted before each probe
    heap_files: list[Path]  # the sequentially scanned table's own segments: read raw with O_DIRECT


def _tablespace_eic(facts: TargetFacts, names: list[str]) -> dict[str, int]:
    """Tablespaces among ``names`` that set their own effective_io_concurrency (SET cannot override it)."""
    out = {}
    for ts in facts.tablespaces:
        if ts.name in names:
            for opt in ts.options:
                key, _, value = opt.partition("=")
                if key == EIC and value.lstrip("-").isdigit():
                    out[ts.name] = int(value)
    return out


async def _relations(conn: asyncpg.Connection) -> list[asyncpg.Record]:
    return list(await conn.fetch(sqlfiles.load(_PROBES_SQL, "relations_by_tablespace"), workload.MIN_PAGES))


async def _plan_device(
    conn: asyncpg.Connection, cfg: Config, policy: Policy, facts: TargetFacts, local: Path, group: DeviceGroup,
    rels: list[asyncpg.Record], cands: list[workload.Candidate],
) -> DevicePlan | str:
    """The workload for one device, or the reason there is none."""
    spaces = set(group.tablespaces) | ({"pg_default"} if group.holds_data_directory else set())
    on_device = [r for r in rels if r["tablespace"] in spaces]
    if not on_device:
        return f"no table of at least {workload.MIN_PAGES} pages lives on it ({', '.join(group.roles)})"
    biggest = on_device[0]
    queries = [workload.seq_query(biggest["relation"], biggest["relpages"])]
    queries[0] = _weighted(queries[0], policy.readahead.seq_scan_weight)
    names = {r["relation"] for r in on_device}
    bitmap = workload.choose([c for c in cands if c.relation in names], relations=1,
                             pages_fraction=cfg.workload.pages_fraction)
    joint, why = False, None
    eic_spec = catalog.load().spec(EIC, facts.server_version_num)
    setting = facts.settings.get(EIC)
    own = _tablespace_eic(facts, group.tablespaces)
    if policy.readahead.bitmap_scan_weight == 0:
        why = "the policy gives bitmap heap scans no weight"
    elif not bitmap:
        why = "no indexed column on its tables drives a sparse bitmap heap scan"
    elif EIC not in policy.search or eic_spec is None:
        why = "the policy does not search effective_io_concurrency"
    elif setting is not None and setting.max_val == "0":
        why = "this server build has no prefetch support"
    elif own:
        why = f"tablespace {', '.join(sorted(own))} sets its own effective_io_concurrency, which SET cannot override"
    else:
        joint = True
    if bitmap and policy.readahead.bitmap_scan_weight > 0:
        queries.append(_weighted(bitmap[0], policy.readahead.bitmap_scan_weight))
    if policy.readahead.seq_scan_weight == 0:
        queries = queries[1:] or queries
    files: list[Path] = []
    for q in queries:
        if q.relation:
            files.extend(await workload.relation_files(conn, local, q.relation))
    first = local / await conn.fetchval("SELECT pg_relation_filepath($1::regclass)", biggest["relation"])
    heap = [f for f in files if f == first or (f.parent == first.parent and f.name.startswith(first.name + "."))]
    return DevicePlan(group, queries, joint, why, files, heap)


def _weighted(q: workload.ProbeQuery, weight: float) -> workload.ProbeQuery:
    from dataclasses import replace

    return replace(q, weight=weight)


def _device_out(group: DeviceGroup | None, placement: Placement | None, status: str, reason: str, **kw: Any) -> DeviceOut:
    if group is not None:
        return DeviceOut(device=group.device.node, description=group.device.description, roles=group.roles,
                         read_ahead_kb=kw.pop("read_ahead_kb", None), status=status, reason=reason, **kw)  # type: ignore[arg-type]
    assert placement is not None
    return DeviceOut(device=None, description=f"{placement.path} ({placement.fstype or 'unknown file system'})",
                     roles=[placement.role], read_ahead_kb=None, status=status, reason=reason)  # type: ignore[arg-type]


def _median_metric(trials: list[Trial], arm: str, key: str) -> float | None:
    vals = [t.metrics[key] for t in trials if t.arm == arm and t.status == "ok" and key in t.metrics]
    return round(statistics.median(vals), 1) if vals else None


async def run(
    cfg: Config,
    policy: Policy,
    facts: TargetFacts,
    conn: asyncpg.Connection,
    dsn: str | None,
    restart: Callable[[], Awaitable[None]] | None,
    journal: Journal,
    *,
    budget: int | None,
    progress: Progress,
    sandbox_devices: frozenset[str] | None = None,
) -> FamilyResult:
    def skipped(reason: str, devices: list[DeviceOut] | None = None) -> FamilyResult:
        return FamilyResult(FamilyOutcome(family=FAMILY, status="skipped", reason=reason), devices=devices or [])

    search_spec = policy.search.get(RA)
    if search_spec is None:
        return skipped("the policy does not search read_ahead_kb")
    local = facts.local_data_directory()
    if local is None:
        where = facts.data_directory or "hidden from this role"
        return skipped(
            f"readahead is a setting of the staging host, and tuner is not running on it: the target's data "
            f"directory ({where}) was not found here with the server's system identifier"
        )
    tablespaces = {ts.name: ts.location for ts in facts.tablespaces}
    groups, untunable = discover(postgres_paths(local, tablespaces))
    devices = [_device_out(None, p, "not tunable", p.reason or "no block device") for p in untunable]
    if sandbox_devices is not None and not cfg.readahead.devices:
        # A sandbox run tunes the sandbox's own loop device, never a disk of the host's.
        host_disks = [g for g in groups if g.device.node not in sandbox_devices]
        devices += [_device_out(g, None, "skipped", "a disk of this host's, not the sandbox's own",
                                read_ahead_kb=g.device.read_ahead_kb()) for g in host_disks]
        groups = [g for g in groups if g.device.node in sandbox_devices]
        if not groups:
            return skipped(
                f"the sandbox lives on this host's own disk ({', '.join(g.device.node for g in host_disks)}); tuner "
                "changes a host disk's readahead in a sandbox run only when [readahead] devices names it "
                "(as root the sandbox gets a loop device of its own)",
                devices,
            )
    if cfg.readahead.devices:
        wanted = {d if d.startswith("/dev/") else f"/dev/{d}" for d in cfg.readahead.devices}
        for g in groups:
            if g.device.node not in wanted:
                devices.append(_device_out(g, None, "skipped", "not listed in [readahead] devices",
                                           read_ahead_kb=g.device.read_ahead_kb()))
        groups = [g for g in groups if g.device.node in wanted]
    if not groups:
        return skipped("no tunable block device under the target's directories", devices)

    rels = await _relations(conn)
    cands = await workload.candidates(conn)
    result = FamilyResult(FamilyOutcome(family=FAMILY, status="done", reason=""), devices=devices)
    workload_sql: list[str] = []
    cache_desc = None
    # Plan every device before probing any: probes restart the server, which closes ``conn``.
    plans: list[tuple[DevicePlan, CacheControl, int]] = []
    for group in groups:
        dev = group.device
        before = dev.read_ahead_kb()
        if not journal.writer.can_write(dev.read_ahead_path):
            result.devices.append(_device_out(group, None, "skipped",
                f"cannot write {dev.read_ahead_path}: run tuner as root, or set [readahead] helper_command",
                read_ahead_kb=before))
            continue
        plan = await _plan_device(conn, cfg, policy, facts, local, group, rels, cands)
        if isinstance(plan, str):
            result.devices.append(_device_out(group, None, "skipped", plan, read_ahead_kb=before))
            continue
        os_method = choose_os_method(local, plan.files)
        if os_method == "none":
            result.devices.append(_device_out(group, None, "skipped",
                "cannot empty the OS page cache: run tuner as root, or as a user who can read the relation files",
                read_ahead_kb=before))
            continue
        plans.append((plan, CacheControl(restart=restart, os_method=os_method, files=plan.files), before))
    probed = len(plans)
    for plan, cache, before in plans:
        workload_sql.extend(q.sql for q in plan.queries)
        cache_desc = cache.describe()
        recs, trials, out = await _probe_device(cfg, policy, facts, dsn, journal, plan, cache, before,
                                                budget=budget, progress=progress)
        result.trials.extend(trials)
        result.recommendations.extend(recs)
        result.devices.append(out)
    if probed == 0:
        return FamilyResult(FamilyOutcome(family=FAMILY, status="skipped",
                                          reason="no device could be probed (see devices)"), devices=result.devices)
    result.outcome = FamilyOutcome(family=FAMILY, status="done", reason=f"searched and confirmed {probed} device(s)",
                                   workload=workload_sql, optimiser="bayesian", cache=cache_desc)
    return result


async def _probe_device(
    cfg: Config, policy: Policy, facts: TargetFacts, dsn: str | None, journal: Journal, plan: DevicePlan,
    cache: CacheControl, before: int, *, budget: int | None, progress: Progress,
) -> tuple[list[RecommendationOut], list[Trial], DeviceOut]:
    group, dev = plan.group, plan.group.device
    spec = policy.search[RA]
    ra_cat = catalog.load().spec(RA, facts.server_version_num)
    assert ra_cat is not None
    dims = [Dimension(RA, max(spec.min, ra_cat.min or 0), min(spec.max, ra_cat.max or spec.max), spec.scale,
                      quantum=readahead_quantum_kb())]
    eic_setting = facts.settings.get(EIC)
    eic_spec = catalog.load().spec(EIC, facts.server_version_num)
    current_eic = int(eic_setting.setting) if eic_setting else int(eic_spec.default if eic_spec else 0)
    current: dict[str, int] = {RA: dims[0].snap(before)}
    if plan.joint:
        es = policy.search[EIC]
        assert eic_spec is not None
        dims.append(Dimension(EIC, max(es.min, eic_spec.min or 0), min(es.max, eic_spec.max or es.max), es.scale))
        current[EIC] = current_eic

    def actuate(kb: int) -> None:
        journal.set_sysfs(dev.read_ahead_path, kb, device=dev.node, name=RA)

    probe = ColdProbe(
        dsn=dsn, queries=plan.queries, cache=cache, statement_timeout_s=policy.guardrails.statement_timeout_s,
        min_cold_read_fraction=policy.cache.min_cold_read_fraction, require_bitmap=False,
        connect_timeout_s=cfg.target.connect_timeout_s, actuators={RA: actuate},
        block_size=int(facts.settings["block_size"].setting) if "block_size" in facts.settings else 8192,
    )
    raw = raw_read_mb_s(plan.heap_files) if plan.heap_files else None
    log.info("plan", family=FAMILY, device=dev.node, description=dev.description, roles=group.roles,
             read_ahead_kb=before, joint=plan.joint, why_not_joint=plan.why_not_joint,
             queries=[q.name for q in plan.queries], raw_read_mb_s=None if raw is None else round(raw, 1))
    optimiser = build_optimiser(policy, dims, current, seed=cfg.tuner.seed, budget=budget)
    trials: list[Trial] = []
    joint_trials: list[Trial] = []
    look = marginal = None
    failure = marginal_failure = None
    test = SequentialTest(min_pairs=policy.budget.confirm_min_pairs, max_pairs=policy.budget.confirm_max_pairs,
                          alpha=policy.decision.alpha, min_effect=policy.decision.min_effect)
    try:
        found = await search(optimiser, probe, max_consecutive_failures=policy.guardrails.max_failed_probes,
                             progress=progress)
        trials.extend(found.trials)
        if found.recommendation is None:
            out = _device_out(group, None, "skipped", f"the search found nothing: {found.stop_reason}",
                              read_ahead_kb=before, raw_read_mb_s=_r(raw))
            return [], trials, out
        best = found.recommendation.config
        near = found.recommendation.near_optimal
        candidate = {k: best[k] for k in current}
        if plan.joint and group.holds_data_directory:
            # The server-wide effective_io_concurrency is the concurrency family's to decide (on bitmap scans
            # alone); here the readahead found jointly is confirmed at today's concurrency.
            candidate[EIC] = current[EIC]
        if candidate != current:
            checked = await confirm(current, candidate, probe, test, progress=progress)
            trials.extend(checked.trials)
            joint_trials = checked.trials
            look, failure = checked.look, checked.failure
        both = plan.joint and candidate[RA] != current[RA] and candidate[EIC] != current[EIC]
        if both and look is not None and look.verdict == "change":
            # The joint interval is mostly readahead's: does effective_io_concurrency earn its change on its own,
            # at the recommended readahead? Its recommendation gets that evidence, not the joint one.
            checked = await confirm({RA: candidate[RA], EIC: current[EIC]}, candidate, probe, test, progress=progress)
            trials.extend(checked.trials)
            marginal, marginal_failure = checked.look, checked.failure
    finally:
        # Put the device back now, so later families and devices measure today's readahead. The session
        # journal restores it too (and after a crash, the next start does).
        actuate(before)

    seq_cur = _median_metric(joint_trials, "baseline", "seq_scan_mb_s")
    seq_rec = _median_metric(joint_trials, "candidate", "seq_scan_mb_s")
    if seq_cur is None:  # no confirmation (today's values won): today's MB/s from the search probes
        seq_cur = _median_metric([t.model_copy(update={"arm": "baseline"}) for t in trials
                                  if t.config == current], "baseline", "seq_scan_mb_s")
    if look is not None:
        decision = "change" if look.verdict == "change" else "keep"
        reason = look.reason
        effect = effect_out(look, test, metric="weighted_execution_time_ms")
    elif candidate == current:
        decision, effect = "keep", None
        reason = "today's values are the model's predicted optimum; nothing to confirm"
    else:
        decision, effect = "keep", None
        reason = f"confirmation could not finish: {failure}"
    eic_rec: tuple[str, str, Any] | None = None  # decision, reason, effect of effective_io_concurrency
    if plan.joint and candidate[EIC] != current[EIC]:
        if candidate[RA] == current[RA] or decision != "change":
            eic_rec = (decision, reason, effect)
        elif marginal is not None:
            eic_rec = ("change" if marginal.verdict == "change" else "keep",
                       f"on its own, at read_ahead_kb = {candidate[RA]}: {marginal.reason}",
                       effect_out(marginal, test, metric="weighted_execution_time_ms"))
        else:
            eic_rec = ("keep", f"its own confirmation could not finish: {marginal_failure}", None)
    eic_changes = eic_rec is not None and eic_rec[0] == "change"
    ra_reason = reason
    if eic_rec is not None and candidate[RA] != current[RA] and not eic_changes and decision == "change":
        ra_reason += (f" (measured with effective_io_concurrency = {candidate[EIC]}, which on its own did not "
                      f"earn a change; keep {current[EIC]})")
    joint_note = (f"searched jointly with {EIC}" if plan.joint else f"{EIC} not searched here: {plan.why_not_joint}")
    if plan.joint and group.holds_data_directory:
        joint_note += (f" (joint optimum at {EIC} = {best[EIC]}; readahead confirmed at today's {current[EIC]}, "
                       "the server-wide value is the concurrency family's)")
    ra_change = decision == "change" and candidate[RA] != before
    recs = [RecommendationOut(
        knob=RA, scope="device", object=dev.node, current=before, recommended=candidate[RA],
        near_optimal=near.get(RA), decision="change" if ra_change else "keep",
        reason=ra_reason if candidate[RA] != before else f"today's readahead is in the optimum ({reason})",
        effect=effect if candidate[RA] != before else None, apply_sql=None, rollback_sql=None,
        requires="reopen", run_on="host",
        host=host_emit.commands(dev, candidate[RA], before) if ra_change else None,
        together_with=[EIC] if ra_change and eic_changes else [],
    )]
    if eic_rec is not None:
        recs.extend(_eic_recommendations(group, candidate, current, near, *eic_rec,
                                         together=[RA] if ra_change and eic_changes else []))
    out = _device_out(
        group, None, "probed", f"{dev.description}; {joint_note}", read_ahead_kb=before, raw_read_mb_s=_r(raw),
        seq_scan_mb_s_current=seq_cur, seq_scan_mb_s_recommended=seq_rec,
        efficiency_current=_ratio(seq_cur, raw), efficiency_recommended=_ratio(seq_rec, raw),
    )
    return recs, trials, out


def _eic_recommendations(
    group: DeviceGroup, candidate: dict[str, int], current: dict[str, int], near: dict[str, tuple[int, int]],
    decision: str, reason: str, effect: Any, *, together: list[str],
) -> list[RecommendationOut]:
    """effective_io_concurrency found jointly with the readahead of a device that holds tablespaces but not the
    data directory: for each tablespace on it (ALTER TABLESPACE, to run on the primary)."""
    common = dict(knob=EIC, current=current[EIC], recommended=candidate[EIC], near_optimal=near.get(EIC),
                  decision=decision, effect=effect, together_with=together,
                  reason=f"{reason} (searched jointly with read_ahead_kb on {group.device.node})")
    change = decision == "change"
    return [RecommendationOut(
        **common, scope="tablespace", object=ts, requires="reload", run_on="primary",  # type: ignore[arg-type]
        apply_sql=sql_emit.alter_tablespace(ts, EIC, candidate[EIC]) if change else None,
        rollback_sql=sql_emit.rollback_tablespace(ts, EIC) if change else None,
    ) for ts in group.tablespaces]


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 1)


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else round(a / b, 3)
