"""Drift orchestration, beside :mod:`tuner.daemon.drift` (which observes and compares): the baseline of each
target kept in the state directory, so a change made while the daemon was down is noticed too; a change recorded
in the store and answered with the runs it calls for; the baseline taken again after every run of tuner's own (a
session restarts the server and changes what it restores). Nothing is ever applied to a target by the daemon."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from tuner.settings.config import state_dir
from tuner.daemon import pins as pinning
from tuner.daemon import workload_shift
from tuner.daemon.drift import Action, action, changes_json, compare, server_values
from tuner.target.fingerprint import observe, recommendation_key
from tuner.daemon.state import DaemonState, Target, label, store_id
from tuner.daemon.worker import Worker
from tuner.errors import TunerError
from tuner.fs.atomic import atomic_write
from tuner.log import get_logger
from tuner.report.model import Recommendation

log = get_logger("tuner.daemon")

Runs = list[tuple[str, list[str], list[str]]]  # (kind, families, knobs) of each run to queue


def follows_statements(cfg: Any) -> bool:
    """Whether the drift check follows the workload's top statements: the target's queries come from
    pg_stat_statements (issue #56 item 5), so a new top is a drift that re-probes."""
    return bool(cfg.workload.queries_from == "pg_stat_statements")


class DriftWatch:
    def __init__(self, state: DaemonState, worker: Worker) -> None:
        self.state, self.worker = state, worker
        self._lock = asyncio.Lock()  # one drift check at a time (the scheduler's and the one after a run)

    def baseline_path(self, target: Target) -> Path:
        return state_dir(self.state.cfg) / f"drift-{target.name}.json"

    async def _observe(self, target: Target) -> dict[str, Any]:
        fp = await observe(target.dsn, timeout_s=target.cfg.target.connect_timeout_s,
                           statements=follows_statements(target.cfg))
        values = server_values(fp)  # what is in force on the server: for /metrics and the page
        self.state.on_server[target.name] = (str(fp.get("observed_at") or ""), values)
        self.state.metrics.set_in_force(target.name, values)
        return fp

    async def after_run(self, target: Target) -> None:
        """After a run of tuner's own: its restarts are no drift (the baseline takes the new postmaster start and
        timeline), but anything else that differs now was changed by someone else, during the run — a normal drift
        check right away records it. (A run puts back only what it changed itself, as it found it.)"""
        async with self._lock:  # no scheduled drift check between the run's end and this one
            self.state.current = None
            if self.state.stopping.is_set():
                return
            path = self.baseline_path(target)
            try:
                fp = await self._observe(target)
                before = json.loads(path.read_text())
            except (TunerError, OSError, ValueError):
                return
            for key in ("postmaster_start", "timeline"):
                if key in (fp.get("server") or {}) and isinstance(before.get("server"), dict):
                    before["server"][key] = fp["server"][key]
            self._save_baseline(target, before)
            await self._check(target.name)

    def _save_baseline(self, target: Target, fp: dict[str, Any]) -> None:
        atomic_write(self.baseline_path(target), json.dumps(fp, sort_keys=True, default=str),
                     dir_mode=0o700)  # mkstemp: the file is 0600

    async def check(self, name: str) -> None:
        """Compare the target's fingerprint with the baseline; record a change and queue what it calls for. None
        runs while a run of tuner's own is under way on any target (targets may share a device), and only one at a
        time (the scheduler's, and the one right after a run)."""
        if self.state.current is not None or self.state.stopping.is_set():
            return  # a session of tuner's own changes what it probes; its own restarts are absorbed after it
        async with self._lock:
            await self._check(name)

    async def _check(self, name: str) -> None:
        st = self.state
        target = st.targets.get(name)
        if target is None:
            return
        try:
            fp = await self._observe(target)
        except (TunerError, OSError) as exc:
            log.warning("daemon.drift_unavailable", target=name, error=str(exc))
            return
        if st.current is not None:
            return
        await self._identify(target, fp)
        path = self.baseline_path(target)
        try:
            before = json.loads(path.read_text())
        except (OSError, ValueError):
            before = None
        self._save_baseline(target, workload_shift.carried(before, fp))
        if before is None:
            log.info("daemon.drift_baseline", target=name)
            return
        changes = compare(before, fp)
        if not changes:
            return
        async with self.worker.store() as db:
            accepted = await db.accepted.find(target.store_id) if target.store_id else []
        act = action(changes, pinning.recommended(accepted))
        # The families' declarations import them: only when there is an accepted recommendation to ask about.
        owners = await asyncio.to_thread(pinning.owners) if accepted and act.kind != "session" else None
        todo, note = answer(target, act, accepted, owners)
        said = f"{act.kind}: {act.reason}" + (f" ({note})" if note else "")
        if target.store_id:
            async with self.worker.store() as db:
                await db.drift_events.record(target.store_id, changes_json(changes), said)
        st.metrics.drift_events.labels(name).inc()
        log.warning("daemon.drift", target=name, changes=[c.sentence() for c in changes], action=act.kind,
                    reason=act.reason, note=note)
        for kind, families, knobs in todo:
            await self.worker.enqueue(name, kind, reason=f"drift: {act.reason}", families=families, knobs=knobs)

    async def _identify(self, target: Target, fp: dict[str, Any]) -> None:
        sysid = (fp.get("server") or {}).get("system_identifier")
        sid = store_id(sysid, fp, target)
        if sid != target.store_id:
            target.store_id = sid
            async with self.worker.store() as db:
                await db.targets.ensure(sid, sysid, fp.get("data_directory"), label(target))
            await self.worker.refresh(target)


def answer(target: Target, act: Action, accepted: list[tuple[str, Recommendation]],
           owners: pinning.Owners | None) -> tuple[Runs, str]:
    """The runs a drift action calls for on this target, and a note on what was changed from the action: only the
    target's own families are probed, and a recommendation tuner cannot re-validate by pinning it (a device's
    readahead, a tablespace's setting, a setting that is not a number) is re-probed instead. ``owners`` may be
    None only when nothing is accepted (then the action names no knob)."""
    if act.kind == "session":
        return [("session", [], [])], ""
    mine = set(target.cfg.tuner.families)
    pinnable = ({recommendation_key(r.knob, r.object) for _, r in accepted if owners.pinnable(r)}
                if owners is not None else set())
    runs: Runs = []
    notes: list[str] = []
    families = [f for f in act.families if f in mine] if act.families else []
    knobs: list[str] = []
    for k in act.knobs:
        fam = owners.of_key(k, accepted) if owners is not None else ""
        if fam not in mine:  # (session_request.allowed checks it again when a run starts)
            notes.append(f"{k} is left alone: its family {fam or '(none)'} is not among this target's families")
        elif k in pinnable:
            knobs.append(k)
        elif fam not in families:
            families.append(fam)
            notes.append(f"{k} is re-probed: tuner re-validates only server-wide numeric settings")
    if act.kind == "reprobe" and act.families and not families:
        notes.append(f"not probed: {', '.join(act.families)} is not among this target's families")
    elif act.kind == "reprobe" or families:
        runs.append(("reprobe", families, []))
    if knobs:
        runs.append(("revalidate", [], knobs))
    return runs, "; ".join(notes)
