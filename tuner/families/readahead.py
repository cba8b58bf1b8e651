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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

import asyncpg

from tuner.fs import sqlfiles
from tuner.settings.config import Config
from tuner.core import bounds
from tuner.core.decide import TODAY_IN_OPTIMUM, Decision, decide, shares
from tuner.core.tune import tune
from tuner.families import plans, readahead_figures, readahead_sections
from tuner.families.base import OBJECTIVE_UNIT, Family, FamilyContext, FamilyResult, Finding, Needs, skipped
from tuner.families.readahead_sections import Combination, DeviceOut
from tuner.hostfacts.blockdev import BlockDevice, DeviceGroup, Placement, discover, postgres_paths, readahead_quantum_kb
from tuner.log import get_logger
from tuner.report.model import DeviceRef, FamilyOutcome, Recommendation, Trial
from tuner.settings.policy import Policy
from tuner.errors import ProbeError
from tuner.probes import workload
from tuner.probes.cache import CacheControl, choose_os_method
from tuner.probes.rawread import raw_read_mb_s
from tuner.probes.coldprobe import ColdProbe
from tuner.target.facts import TargetFacts
from tuner.target.fingerprint import recommendation_key

log = get_logger("tuner.readahead")

FAMILY = "readahead"
RA = "read_ahead_kb"
EIC = "effective_io_concurrency"
METRIC = "weighted_execution_time_ms"
_PROBES_SQL = str(Path(workload.__file__).parent)


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


async def relations(conn: asyncpg.Connection) -> list[asyncpg.Record]:
    """The target's relations of at least ``workload.MIN_PAGES`` pages, largest first, with their tablespaces."""
    return list(await conn.fetch(sqlfiles.load(_PROBES_SQL, "relations_by_tablespace"), workload.MIN_PAGES))


async def plan_device(
    conn: asyncpg.Connection, cfg: Config, policy: Policy, facts: TargetFacts, local: Path, group: DeviceGroup,
    rels: list[asyncpg.Record], cands: list[workload.Candidate], replayed: list[workload.ProbeQuery] | None = None,
) -> DevicePlan | str:
    """The workload for one device, or the reason there is none: a cold sequential scan of its largest table and,
    where an uncorrelated index drives one, a sparse bitmap heap scan, weighted as the policy's ``[read_path]``
    says (public: the 2-D truth sweep plans with it, so it measures the family's own workload). With ``replayed``
    (the statements of pg_stat_statements), those of them that read a table on the device, weighted by their shares."""
    spaces = set(group.tablespaces) | ({"pg_default"} if group.holds_data_directory else set())
    on_device = [r for r in rels if r["tablespace"] in spaces]
    if not on_device:
        return f"no table of at least {workload.MIN_PAGES} pages lives on it ({', '.join(group.roles)})"
    biggest = on_device[0]
    if replayed is not None:
        return await _own_plan(conn, policy, facts, local, group, on_device, replayed)
    queries = [workload.seq_query(biggest["relation"])]
    queries[0] = _weighted(queries[0], policy.read_path.seq_scan_weight)
    names = {r["relation"] for r in on_device}
    bitmap = workload.choose([c for c in cands if c.relation in names], relations=1,
                             pages_fraction=cfg.workload.pages_fraction)
    joint, why = False, None
    eic_dim = bounds.dimension(EIC, policy, facts)
    own = _tablespace_eic(facts, group.tablespaces)
    if policy.read_path.bitmap_scan_weight == 0:
        why = "the policy gives bitmap heap scans no weight"
    elif not bitmap:
        why = "no indexed column on its tables drives a sparse bitmap heap scan"
    elif isinstance(eic_dim, str):
        why = eic_dim
    elif own:
        why = f"tablespace {', '.join(sorted(own))} sets its own effective_io_concurrency, which SET cannot override"
    else:
        joint = True
    if bitmap and policy.read_path.bitmap_scan_weight > 0:
        queries.append(_weighted(bitmap[0], policy.read_path.bitmap_scan_weight))
    if policy.read_path.seq_scan_weight == 0:
        queries = queries[1:] or queries
    files: list[Path] = []
    for q in queries:
        if q.relation:
            files.extend(await workload.relation_files(conn, local, q.relation))
    first = local / await conn.fetchval("SELECT pg_relation_filepath($1::regclass)", biggest["relation"])
    heap = [f for f in files if f == first or (f.parent == first.parent and f.name.startswith(first.name + "."))]
    return DevicePlan(group, queries, joint, why, files, heap)


async def _own_plan(conn: asyncpg.Connection, policy: Policy, facts: TargetFacts, local: Path, group: DeviceGroup,
                    on_device: list[asyncpg.Record], own: list[workload.ProbeQuery]) -> DevicePlan | str:
    """The device's plan from the operator's statements: those whose scanned table lives on it; effective_io_concurrency
    is searched with readahead where one of them is a bitmap heap scan."""
    names = {r["relation"] for r in on_device}
    queries = [q for q in own if q.relation in names]
    if not queries:
        return (f"none of the workload's queries scans a table of at least {workload.MIN_PAGES} pages on it "
                f"({', '.join(group.roles)})")
    eic_dim = bounds.dimension(EIC, policy, facts)
    tablespace_eic = _tablespace_eic(facts, group.tablespaces)
    why = ("none of its statements is a bitmap heap scan" if not any("Bitmap Heap Scan" in q.scans for q in queries)
           else eic_dim if isinstance(eic_dim, str)
           else f"tablespace {', '.join(sorted(tablespace_eic))} sets its own effective_io_concurrency, which SET "
                "cannot override" if tablespace_eic else None)
    files: list[Path] = []
    for q in queries:
        if q.relation:
            files.extend(await workload.relation_files(conn, local, q.relation))
    first_rel = on_device[0]["relation"]
    first = local / await conn.fetchval("SELECT pg_relation_filepath($1::regclass)", first_rel)
    heap = [f for f in await workload.relation_files(conn, local, first_rel)
            if f == first or (f.parent == first.parent and f.name.startswith(first.name + "."))]
    return DevicePlan(group, queries, why is None, why, files, heap)


def _weighted(q: workload.ProbeQuery, weight: float) -> workload.ProbeQuery:
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


class Readahead(Family):
    name: ClassVar[str] = FAMILY
    reads_workload: ClassVar[bool] = True
    needs: ClassVar[Needs] = Needs(local_host=True)
    summary: ClassVar[str] = "read_ahead_kb of each block device under the data directory, pg_wal and tablespaces"
    objective_unit: ClassVar[str] = OBJECTIVE_UNIT  # a cold sequential scan's execution time
    object_scopes: ClassVar[tuple[str, ...]] = ("device", "tablespace")  # read_ahead_kb; eic per tablespace
    html_sections = staticmethod(readahead_figures.html_sections)
    policy_section: ClassVar[type[readahead_sections.Policy]] = readahead_sections.Policy
    report_section: ClassVar[type[readahead_sections.Report]] = readahead_sections.Report

    def applicable(self, ctx: FamilyContext) -> str | None:
        if RA not in ctx.policy.search:
            return f"the policy does not search {RA}"
        return None

    async def preflight(self, ctx: FamilyContext) -> plans.FamilyPlan:
        """What `tuner check` shows: the devices, and whether tuner may write each one's readahead."""
        return plans.devices(ctx, self.name)

    async def run(self, ctx: FamilyContext) -> FamilyResult:
        cfg, policy, facts = ctx.cfg, ctx.policy, ctx.facts
        local = facts.local_data_directory()
        assert local is not None  # the family needs the local host: the orchestrator checked it
        tablespaces = {ts.name: ts.location for ts in facts.tablespaces}
        groups, untunable = discover(postgres_paths(local, tablespaces))
        devices = [_device_out(None, p, "not tunable", p.reason or "no block device") for p in untunable]
        if ctx.sandbox and not cfg.readahead.devices:
            # A sandbox run tunes the sandbox's own loop device, never a disk of the host's.
            host_disks = [g for g in groups if g.device.node not in ctx.own_devices]
            devices += [_device_out(g, None, "skipped", "a disk of this host's, not the sandbox's own",
                                    read_ahead_kb=g.device.read_ahead_kb()) for g in host_disks]
            groups = [g for g in groups if g.device.node in ctx.own_devices]
            if not groups:
                return skipped(FAMILY,
                    f"the sandbox lives on this host's own disk ({', '.join(g.device.node for g in host_disks)}); "
                    "tuner changes a host disk's readahead in a sandbox run only when [readahead] devices names it "
                    "(as root the sandbox gets a loop device of its own)", readahead_sections.Report(devices=devices))
        if cfg.readahead.devices:
            wanted = {d if d.startswith("/dev/") else f"/dev/{d}" for d in cfg.readahead.devices}
            devices += [_device_out(g, None, "skipped", "not listed in [readahead] devices",
                                    read_ahead_kb=g.device.read_ahead_kb()) for g in groups if g.device.node not in wanted]
            groups = [g for g in groups if g.device.node in wanted]
        if not groups:
            return skipped(FAMILY, "no tunable block device under the target's directories",
                           readahead_sections.Report(devices=devices))

        # Plan every device before probing any: probes restart the server.
        planned: list[tuple[DevicePlan, CacheControl, int]] = []
        async with ctx.connection() as conn:
            rels = await relations(conn)
            cands = await workload.candidates(conn)
            replayed: list[workload.ProbeQuery] | None = None
            if plans.own_workload(ctx):  # your statements or queries are the read path's one workload
                try:
                    replayed = await plans.read_path_queries(ctx, conn)
                except ProbeError as exc:
                    return skipped(FAMILY, f"{exc} ({exc.hint})" if exc.hint else str(exc))
            for group in groups:
                dev = group.device
                before = dev.read_ahead_kb()
                why_not = None
                if not ctx.journal.writer.can_write(dev.read_ahead_path):
                    why_not = f"cannot write {dev.read_ahead_path}: run tuner as root, or set [readahead] helper_command"
                else:
                    plan = await plan_device(conn, cfg, policy, facts, local, group, rels, cands, replayed)
                    if isinstance(plan, str):
                        why_not = plan
                    elif (os_method := choose_os_method(local, plan.files)) == "none":
                        why_not = ("cannot empty the OS page cache: run tuner as root, or as a user who can read the "
                                   "relation files")
                    else:
                        planned.append((plan, await CacheControl.plan(
                            facts, [q.relation for q in plan.queries], connector=ctx.target.connect,
                            restart=ctx.target.restart, os_method=os_method, files=plan.files, fresh_files=True),
                            before))
                if why_not is not None:
                    devices.append(_device_out(group, None, "skipped", why_not, read_ahead_kb=before))
        if not planned:
            return skipped(FAMILY, "no device could be probed (see devices)", readahead_sections.Report(devices=devices))
        result = FamilyResult(FamilyOutcome(family=FAMILY, status="done", reason=""))
        workload_sql: list[str] = []
        probed: list[workload.ProbeQuery] = []
        warm_notes: list[str] = []
        for plan, cache, before in planned:
            workload_sql.extend(q.as_run for q in plan.queries)
            probed.extend(plan.queries)
            recs, trials, out, note = await _probe_device(ctx, plan, cache, before)
            if note:
                warm_notes.append(f"{plan.group.device.node}: {note}")
            result.trials.extend(trials)
            result.recommendations.extend(recs)
            devices.append(out)
        measured = sum(1 for d in devices if d.status == "probed")
        if measured == 0:
            # Every probe failed or was rejected: say so, why, and how to fix it — not "done".
            why = "; ".join(f"{d.device}: {d.reason}" for d in devices if d.device in {p.group.device.node for p, _, _ in planned})
            fix = ("" if ctx.target.restart is not None else " — shared buffers cannot be emptied without a restart: "
                   "set [target] restart_command (and guardrails.allow_restart in the policy)")
            result.outcome = FamilyOutcome(family=FAMILY, status="failed", workload=workload_sql,
                                           reason=f"nothing could be measured on {len(planned)} device(s) ({why}){fix}",
                                           optimiser="bayesian", cache=planned[-1][1].describe())
        else:
            result.outcome = FamilyOutcome(family=FAMILY, status="done",
                                           reason=f"searched and confirmed {measured} of {len(planned)} device(s)",
                                           workload=workload_sql, optimiser="bayesian", cache=planned[-1][1].describe(),
                                           statements=plans.statement_lines(probed),
                                           warm_start="; ".join(warm_notes) or None)
        result.section = readahead_sections.Report(devices=devices)
        return result


def cold_probe(ctx: FamilyContext, plan: DevicePlan, cache: CacheControl, actuate: Any,
                group: DeviceGroup | None = None) -> ColdProbe:
    """The device's probe: its scans, each from a cold cache, with ``actuate`` setting the readahead."""
    policy, facts = ctx.policy, ctx.facts
    return ColdProbe(
        dsn=ctx.target.dsn, queries=plan.queries, cache=cache, statement_timeout_s=policy.guardrails.statement_timeout_s,
        min_cold_read_fraction=policy.cache.min_cold_read_fraction, require_bitmap=False,
        # Each scan cold: the bitmap scan after the sequential scan of the same table found its blocks in the OS
        # page cache (PostgreSQL counts those as reads, so the cold check could not see it): 120 ms against
        # 942 ms cold, measured on 15.
        cold_per_query=True,
        connect_timeout_s=ctx.cfg.target.connect_timeout_s, actuators={RA: actuate}, connector=ctx.target.connect,
        precheck=ctx.target.check,
        # The block device's counters around each probe (the regime line) only where they are the data
        # directory's device: another device's counters would describe other reads.
        disk=ctx.disk if group is not None and group.holds_data_directory else None,
        block_size=int(facts.settings["block_size"].setting) if "block_size" in facts.settings else 8192,
        # The server's version selects the I/O evidence each trial carries, as the concurrency family's do:
        # pg_stat_io's reads and hits (16+) and bytes per read (18+), EXPLAIN (IO)'s read-stream figures (19+).
        server_version_num=facts.server_version_num,
    )


async def _probe_device(
    ctx: FamilyContext, plan: DevicePlan, cache: CacheControl, before: int,
) -> tuple[list[Recommendation], list[Trial], DeviceOut, str | None]:
    policy, facts, journal = ctx.policy, ctx.facts, ctx.journal
    group, dev = plan.group, plan.group.device
    ra_dim = bounds.dimension(RA, policy, facts, quantum=readahead_quantum_kb())
    if isinstance(ra_dim, str):
        return [], [], _device_out(group, None, "skipped", ra_dim, read_ahead_kb=before), None
    dims = [ra_dim]
    current: dict[str, int] = {RA: ra_dim.snap(before)}
    # What is in force for these knobs: the device's readahead; the server's concurrency on the data directory's
    # device (the session's, which the concurrency family owns), the tablespaces' elsewhere (this family's).
    accepted = {RA: ctx.accepted.get(recommendation_key(RA, dev.node))}
    if plan.joint:
        eic_dim = bounds.dimension(EIC, policy, facts)
        assert not isinstance(eic_dim, str)  # plan_device checked it
        dims.append(eic_dim)
        current[EIC] = int(bounds.today(EIC, facts).value)
        accepted[EIC] = (ctx.accepted.get(EIC) if group.holds_data_directory else
                         _same([ctx.accepted.get(recommendation_key(EIC, ts)) for ts in group.tablespaces]))

    def actuate(kb: int) -> None:
        journal.set_sysfs(dev.read_ahead_path, kb, device=dev.node, name=RA)

    probe = cold_probe(ctx, plan, cache, actuate, group)
    raw = raw_read_mb_s(plan.heap_files) if plan.heap_files else None
    log.info("plan", family=FAMILY, device=dev.node, description=dev.description, roles=group.roles,
             read_ahead_kb=before, joint=plan.joint, why_not_joint=plan.why_not_joint,
             queries=[q.name for q in plan.queries], raw_read_mb_s=None if raw is None else round(raw, 1))
    # A warm start from the latest stored session on a matching target that probed a device holding the same
    # directories (device names change between boots and sandboxes; what a device holds does not).
    where = ", ".join(group.roles)
    trials: list[Trial] = []
    settle_at = before  # where the device is left: today's, or the readahead this session settled on
    try:
        tuned = await tune(ctx, FAMILY, probe, dims, current, metric=METRIC, confirm=False, object=where,
                           accepted={k: v for k, v in accepted.items() if v is not None})
        warm_start = tuned.warm_start
        trials.extend(tuned.trials)
        if tuned.found is None or tuned.settled is None:
            out = _device_out(group, None, "skipped", f"the search found nothing: {tuned.stop_reason}",
                              read_ahead_kb=before, raw_read_mb_s=_r(raw))
            return [], _on(trials, where), out, warm_start
        # The read path as one answer: the combination the operator will run, confirmed against today's, then
        # each knob's own share (:func:`shares`).
        candidate, notes = tuned.settled.candidate, tuned.settled.notes
        combination = await decide(current, candidate, probe, policy, metric=METRIC,
                                   near_optimal=tuned.found.near_optimal, progress=ctx.progress)
        own = await shares(current, combination, probe, policy, metric=METRIC, progress=ctx.progress)
        for d in own.values():
            if d is not combination:
                trials.extend(d.trials)
        trials.extend(combination.trials)
        ra_change = _changes(own, RA) and candidate[RA] != before
        if ra_change:
            settle_at = candidate[RA]
    finally:
        # The device stays at the readahead this session settled on, so that later families (and devices)
        # measure what the operator will run; else it is put back now. The session's journal restores it at
        # the end either way (and after a crash, the next start does).
        actuate(settle_at)

    seq_cur = _median_metric(combination.trials, "baseline", "seq_scan_mb_s")
    seq_rec = _median_metric(combination.trials, "candidate", "seq_scan_mb_s")
    if seq_cur is None:  # no confirmation (today's values won): today's MB/s from the search probes
        seq_cur = _median_metric([t.model_copy(update={"arm": "baseline"}) for t in trials
                                  if t.config == current], "baseline", "seq_scan_mb_s")
    eic_change = plan.joint and _changes(own, EIC)
    together = [EIC] if ra_change and eic_change else []
    recs = [_knob_recommendation(RA, before, candidate, combination, own, notes, scope="device", object=dev.node,
                                 source="kernel", requires="reopen", run_on="host", device=device_ref(dev),
                                 together_with=together)]
    joint_note = (f"searched jointly with {EIC}" if plan.joint else f"{EIC} not searched here: {plan.why_not_joint}")
    if plan.joint and group.holds_data_directory:
        # The server-wide effective_io_concurrency is the concurrency family's to recommend: handed on as data.
        joint_note += f" (the combination confirmed; {EIC} handed on to the concurrency family)"
        ctx.findings[EIC] = Finding(
            knob=EIC, by=FAMILY, decided=own.get(EIC, combination), combination=combination,
            where=f"{RA} = {candidate[RA] if ra_change else before} on {dev.node}",
            together_with=(RA,) if ra_change and eic_change else (), note=notes.get(EIC))
    elif plan.joint:
        recs.extend(_knob_recommendation(
            EIC, current[EIC], candidate, combination, own, notes, scope="tablespace", object=ts, source="server",
            requires="reload", run_on="primary", together_with=[RA] if ra_change and eic_change else [],
            note=f" (searched jointly with read_ahead_kb on {dev.node})") for ts in group.tablespaces)
    out = _device_out(
        group, None, "probed", f"{dev.description}; {joint_note}", read_ahead_kb=before, raw_read_mb_s=_r(raw),
        seq_scan_mb_s_current=seq_cur, seq_scan_mb_s_recommended=seq_rec,
        efficiency_current=_ratio(seq_cur, raw), efficiency_recommended=_ratio(seq_rec, raw),
        combination=Combination(today=current, candidate=candidate, decision=combination.decision,
                                reason=combination.reason, effect=combination.effect) if plan.joint else None,
    )
    return recs, _on(trials, where), out, warm_start


def _same(values: list[Any]) -> Any:
    """The one value all of ``values`` share, else None (tablespaces on one device that disagree)."""
    return values[0] if values and all(v == values[0] for v in values) else None


def _changes(own: dict[str, Decision], knob: str) -> bool:
    return knob in own and own[knob].decision == "change"


def _knob_recommendation(knob: str, today: int, candidate: dict[str, int], combination: Decision,
                         own: dict[str, Decision], notes: dict[str, str], *, note: str = "",
                         **fields: Any) -> Recommendation:
    """``knob``'s recommendation from the combination's confirmation and its own share (:func:`shares`), with the
    plateau rule's sentence where the rule chose its value (``notes``). A knob the combination did not move is
    kept; one whose share was not measured (the combination was kept) has the combination's evidence."""
    rule = f"; {notes[knob]}" if knob in notes else ""
    decided = own.get(knob)
    near: Any = combination.near_optimal.get(knob)  # a NearRange: the recommendation takes its facts from it
    if candidate[knob] == today:
        return Recommendation(knob=knob, current=today, recommended=today, near_optimal=near, decision="keep",
                              reason=(notes.get(knob) or TODAY_IN_OPTIMUM) + note, effect=None, **fields)
    if decided is None:  # the combination was kept as a whole: its evidence is the combination's
        return Recommendation(knob=knob, current=today, recommended=candidate[knob], near_optimal=near,
                              decision="keep", reason=combination.reason + rule + note, effect=combination.effect,
                              **fields)
    return Recommendation(knob=knob, current=today, recommended=candidate[knob], near_optimal=near,
                          decision=decided.decision, reason=decided.reason + rule + note, effect=decided.effect,
                          **fields)


def _on(trials: list[Trial], where: str) -> list[Trial]:
    """The trials, marked with the directories of the device they probed (the store keeps them apart)."""
    return [t.model_copy(update={"object": where}) for t in trials]


def device_ref(dev: BlockDevice) -> DeviceRef:
    """The device as the host commands and the udev rule name it."""
    sysfs = dev.read_ahead_path.as_posix().replace(dev.sys_dir.as_posix(), f"/sys/block/{dev.name}", 1)
    return DeviceRef(node=dev.node, name=dev.name, sysfs_path=sysfs, match=dict(dev.match))


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 1)


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else round(a / b, 3)
