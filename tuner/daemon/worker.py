"""The daemon's worker: it owns the queue (the store's ``daemon_runs``) and one long-lived store handle, and does
one run at a time — a session, a re-probe of some families, or a re-validation — inside the maintenance windows
(or at once, when it was forced).

Every piece of work is a row of ``daemon_runs`` before it starts (queued → running → done, failed, interrupted,
or queued again when its window closed or the daemon stopped). A daemon killed mid-session finds its row 'running'
when it starts again: the journal is restored first, the row becomes 'interrupted', and the same work is queued
again.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import signal
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from tuner.actuate import Journal, SysfsWriter
from tuner.settings.config import state_dir
from tuner.daemon import pins as pinning
from tuner.daemon import session_request
from tuner.daemon.residency import LockNotice, lock_working_set
from tuner.daemon.state import Current, DaemonState, Target, store_id
from tuner.errors import ConfigError, DaemonError, TunerError
from tuner.families import REGISTRY
from tuner.families.base import Pin
from tuner.log import get_logger
from tuner.settings.policy import load_policy
from tuner.report.validate import check
from tuner.session.stop import STOP
from tuner.store import Store, StoreError, open_store
from tuner.settings.schedule import Windows, local_timezone

log = get_logger("tuner.daemon")

IDLE_POLL_S = 60.0  # the worker looks at its queue at least this often (windows open, timers)
MAX_ATTEMPTS = 3  # a run stopped by its window, the daemon's stop or a crash is queued again at most this often


class DaemonProgress:
    """The runner's progress, as systemd STATUS= and /v1/sessions/ID."""

    def __init__(self, state: DaemonState, current: Current) -> None:
        self.state, self.current = state, current

    def phase(self, name: str, total: int | None) -> None:
        self.current.phase, self.current.step = name, ""
        self.state.say(f"{self.current.run['kind']} {self.current.run['id']} on {self.current.target}: {name}")

    def advance(self, text: str) -> None:
        self.current.step = text
        if self.current.phase != "sandbox":
            self.current.probes += 1
            self.state.metrics.probes.labels(self.current.target).inc()


class Worker:
    def __init__(self, state: DaemonState) -> None:
        self.state = state
        # After each run: the drift watch takes its baseline again (set by the daemon; tuner.daemon.watch).
        self.after_run: Callable[[Target], Awaitable[None]] | None = None
        self._db: Store | None = None
        self._closer: contextlib.AsyncExitStack | None = None
        # One statement at a time on the handle: an asyncpg connection refuses a second concurrent operation.
        self._store_lock = asyncio.Lock()
        self._locked_notice = LockNotice()

    # -- the store handle -------------------------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def store(self) -> AsyncIterator[Store]:
        """The daemon's store, opened on first use and kept; one user at a time. A handle that failed is closed
        and opened afresh by the next user (a store server that restarted)."""
        async with self._store_lock:
            if self._db is None:
                stack = contextlib.AsyncExitStack()
                db = await stack.enter_async_context(open_store(self.state.cfg, check=check))
                if db is None:
                    await stack.aclose()
                    raise ConfigError("the daemon needs its store ([store] enabled = false)",
                                      hint="remove [store] enabled = false; the daemon keeps its work there")
                self._db, self._closer = db, stack
            try:
                yield self._db
            except StoreError:
                await self._close()
                raise

    async def close(self) -> None:
        async with self._store_lock:
            await self._close()

    async def _close(self) -> None:
        closer, self._db, self._closer = self._closer, None, None
        if closer is not None:
            with contextlib.suppress(Exception):
                await closer.aclose()

    # -- the queue --------------------------------------------------------------------------------------------
    async def enqueue(self, target: str, kind: str, *, reason: str, families: list[str] | tuple[str, ...] = (),
                      knobs: list[str] | tuple[str, ...] = (), forced: bool = False) -> dict[str, Any]:
        """Queue a run unless the same work is queued already (a schedule that fires twice queues it once)."""
        st = self.state
        async with self.store() as db:
            # The same work queued already is not queued twice (a schedule that fires while its session waits for
            # the window; a client that POSTs in a loop): the queued run is the answer.
            for run in await db.runs.find(st.owner, status=("queued",), target=target):
                if (run["kind"] == kind and sorted(run["families"]) == sorted(families)
                        and sorted(run["knobs"]) == sorted(knobs) and run["forced"] == forced):
                    run["already_queued"] = True
                    return run
            run = {"id": uuid.uuid4().hex[:12], "owner": st.owner, "target": target,
                   "target_id": st.targets[target].store_id, "kind": kind, "families": list(families),
                   "knobs": list(knobs), "reason": reason, "forced": forced, "attempt": 1, "status": "queued"}
            await db.runs.add(run)
        log.info("daemon.queued", run=run["id"], target=target, kind=kind, reason=reason, forced=forced)
        st.wake.set()
        return run

    async def recover_interrupted(self) -> None:
        """At start: the runs a killed daemon left 'running' become 'interrupted' and are queued again."""
        st = self.state
        async with self.store() as db:
            for run in await db.runs.find(st.owner, status=("running",), limit=1000):
                detail = "the daemon ended mid-run (killed or crashed); what it had changed was restored"
                await db.runs.update(run["id"], status="interrupted", detail=detail, ended=True)
                st.metrics.runs.labels(run["target"], run["kind"], "interrupted").inc()
                log.warning("daemon.interrupted", run=run["id"], target=run["target"])
                if run["target"] in st.targets:
                    await self._again(db, run, "interrupted", detail)

    def windows(self) -> Windows:
        return self.state.cfg.daemon.windows

    async def _next(self) -> tuple[dict[str, Any], bool] | None:
        """The oldest queued run that may start now (forced, or its window is open), and whether it is forced."""
        async with self.store() as db:
            queued = await db.runs.find(self.state.owner, status=("queued",), limit=1000)
        now = datetime.now(UTC)
        for run in reversed(queued):  # oldest first
            if run["target"] not in self.state.targets:
                continue
            if run["forced"] or self.windows().contains(now):
                return run, bool(run["forced"])
        return None

    async def loop(self) -> None:
        st = self.state
        while not st.stopping.is_set():
            try:
                nxt = await self._next()
            except TunerError as exc:
                st.store_problem = str(exc)
                log.error("daemon.store", error=str(exc))
                nxt = None
            else:
                st.store_problem = None
            if nxt is None:
                st.say(st.status())
                st.wake.clear()
                wait = IDLE_POLL_S  # an enqueue wakes the worker at once; this is for windows that open
                now = datetime.now(UTC)  # (windows answer in UTC: differences across a clock change stay right)
                windows = self.windows()
                if not windows.contains(now):
                    wait = max(1.0, min(wait, (windows.next_open(now) - now).total_seconds() + 1))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(st.wake.wait(), timeout=wait)
                continue
            try:
                await self._execute(*nxt)
            except Exception:  # noqa: BLE001 — a store that failed around a run: logged, and the worker goes on
                log.exception("daemon.worker_error", run=nxt[0]["id"])
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(st.stopping.wait(), timeout=5)

    # -- one run ----------------------------------------------------------------------------------------------
    async def _execute(self, run: dict[str, Any], forced: bool) -> None:
        st = self.state
        target = st.targets[run["target"]]
        if st.stopping.is_set():
            return  # it stays queued for the next start
        async with self.store() as db:
            await db.runs.update(run["id"], status="running", started=True)
        current = Current(run=run, target=target.name)
        st.current = current
        st.metrics.running.labels(target.name).set(1)
        closer: asyncio.TimerHandle | None = None
        if not forced:
            now = datetime.now(UTC)
            closes = self.windows().closes_at(now)
            if closes is not None:
                local = closes.astimezone(local_timezone())
                closer = asyncio.get_running_loop().call_later(
                    max(0.0, (closes - now).total_seconds()), self.stop_current,
                    f"its maintenance window closed at {local:%H:%M}")
        STOP.reset()
        current.task = asyncio.create_task(self._session(target, run, current))
        if st.stopping.is_set():  # a stop that came while the run was being marked running
            self.stop_current("the daemon is stopping")
        status, detail = "failed", None
        try:
            report = await current.task
            status, detail = "done", _outcome(report)
        except asyncio.CancelledError:
            # The session was stopped (its window closed, the daemon stops); the runner put everything back.
            status = "deferred"
            detail = f"stopped when {current.stop_reason or 'it was cancelled'}"
        except TunerError as exc:
            status, detail = "failed", f"{exc}" + (f" ({exc.hint})" if exc.hint else "")
        except Exception as exc:  # a bug: logged with its traceback, and the daemon keeps serving
            log.exception("daemon.run_failed", run=run["id"])
            status, detail = "failed", f"unexpected error: {type(exc).__name__}: {exc}"
        finally:
            if closer is not None:
                closer.cancel()
            STOP.reset()
            st.metrics.running.labels(target.name).set(0)
            st.metrics.runs.labels(target.name, run["kind"], status).inc()
            left = await asyncio.to_thread(self._recover_journal)
            if left:
                detail = f"{detail}; {left}"
        try:
            async with self.store() as db:
                await db.runs.update(run["id"], status=status, detail=detail, target_id=target.store_id, ended=True)
                if status == "deferred":
                    await self._again(db, run, status, detail)
        except TunerError as exc:
            log.error("daemon.store", error=str(exc))
        log.info("daemon.run_ended", run=run["id"], target=target.name, kind=run["kind"], status=status,
                 detail=detail)
        try:
            await self.refresh(target)
            if self.after_run is not None:
                await self.after_run(target)
        except Exception:  # noqa: BLE001 — the drift check's own failure must not end the worker
            log.exception("daemon.drift_failed", target=target.name)
        finally:
            st.current = None

    async def _again(self, db: Store, run: dict[str, Any], status: str, detail: str | None) -> None:
        """Queue a stopped or interrupted run again, as a new run (its id is its session's id), for a window: at
        most :data:`MAX_ATTEMPTS` times."""
        attempt = int(run.get("attempt") or 1) + 1
        if attempt > MAX_ATTEMPTS:
            log.warning("daemon.gave_up", run=run["id"], attempts=attempt - 1)
            await db.runs.update(run["id"], status=status,
                                detail=f"{detail}; not queued again after {attempt - 1} attempts")
            return
        base = run["reason"].split(" (attempt ")[0]
        again = dict(run, id=uuid.uuid4().hex[:12], owner=self.state.owner, status="queued", requested_at=None,
                     started_at=None, ended_at=None, detail=None, attempt=attempt, forced=False,
                     reason=f"{base} (attempt {attempt}, again after {status} {run['id']})")
        await db.runs.add(again)

    def _recover_journal(self) -> str | None:
        """Whatever a run could not put back (a server restarting as it was stopped), tried once more now."""
        cfg = self.state.cfg
        try:
            journal = Journal(state_dir(cfg), writer=SysfsWriter(cfg.readahead.helper_command))
            failed = [r.sentence() for r in journal.recover() if not r.ok]
        except TunerError as exc:
            log.error("daemon.journal", error=str(exc))
            self.state.metrics.restore_ok.set(0)
            return f"the journal could not be restored: {exc}"
        self.state.metrics.restore_ok.set(0 if failed else 1)
        if failed:
            self.state.journal_left = f"{len(failed)} journal entries could not be put back, first {failed[0]}"
            return self.state.journal_left
        self.state.journal_left = None
        return None

    def stop_current(self, reason: str) -> None:
        cur = self.state.current
        if cur is None or cur.task is None or cur.task.done() or cur.stop_reason:
            return
        cur.stop_reason = reason
        log.info("daemon.stopping_run", run=cur.run["id"], reason=reason)
        STOP.request(signal.SIGTERM, reason)
        cur.task.cancel()

    async def _session(self, target: Target, run: dict[str, Any], current: Current) -> Any:
        # The optimiser stack (numpy, scipy, scikit-learn, scikit-optimize) is imported by the first session, in a
        # thread: imported on the event loop it would hold /metrics and the watchdog for a second or more. Then the
        # code the daemon has touched is locked in RAM, or each drop_caches of a cold probe evicts it and /metrics
        # stalls reading it back (tuner.daemon.residency).
        await asyncio.to_thread(_import_session_stack)
        locked = await asyncio.to_thread(lock_working_set)
        self._locked_notice(locked)
        # The optimiser stack, imported above in a thread: on the event loop it would stall the API.
        from tuner.session.stored import run_stored

        cfg = target.cfg
        policy = load_policy(cfg.tuner.policy, config_dir=cfg.source.parent if cfg.source else None)
        policy = policy.for_daemon()  # longer confirmations: time is cheap in a maintenance window
        asked, pins = run["families"], None
        if run["kind"] == "revalidate":  # its pins name its families, and they pass the same check
            pins = await self.pins(target, run["knobs"])
            asked = tuple(pins)
        families = session_request.allowed(asked, cfg.tuner.families, target.name, kind=run["kind"])
        if pins is not None:
            pins = {f: pins[f] for f in families}
        # A store connection of the session's own, not the worker's handle: the runner holds its advisory locks on
        # it for the whole session (released when it closes), and the API keeps reading the store meanwhile. (The
        # worker's handle opened, so the store is on; a target's configuration carries the daemon's [store].)
        done = await run_stored(cfg, policy, kind=run["kind"], use_sandbox=target.sandbox, families=families,
                                session_id=run["id"], where=target.servers, pins=pins,
                                progress=DaemonProgress(self.state, current))
        report = done.report
        target.store_id = store_id(report.target.system_identifier, report.target.fingerprint or {}, target)
        if done.problem is not None:  # the run fails with it, as any store failure does
            raise done.problem
        return report

    async def pins(self, target: Target, knobs: list[str]) -> dict[str, Pin]:
        """The target's accepted recommendations that can be re-validated by pinning them, per family."""
        if not target.store_id:
            return {}
        async with self.store() as db:
            accepted = await db.accepted.find(target.store_id)
        if not accepted:
            return {}
        owners = await asyncio.to_thread(pinning.owners)  # imports the families: not on the event loop
        return pinning.pins(accepted, owners, knobs)

    async def refresh(self, target: Target) -> None:
        """The target's recommendation gauges from the store."""
        if not target.store_id:
            return
        try:
            async with self.store() as db:
                accepted = await db.accepted.find(target.store_id)
                latest = await db.sessions.newest(target=target.store_id, limit=1)
        except TunerError as exc:
            log.error("daemon.store", error=str(exc))
            return
        self.state.metrics.set_recommendations(target.name, [r for _, r in accepted])
        if latest:
            self.state.metrics.last_session.labels(target.name).set(
                datetime.fromisoformat(latest[0].started_at).timestamp())

    async def revalidate(self, name: str) -> None:
        """Queue a re-validation when one is due: ``revalidate_every`` after the last one (or after the session
        that made the oldest recommendation in force), counted from the store, not from this process's start —
        a daemon that is reloaded or restarted daily still re-validates weekly."""
        st = self.state
        target = st.targets.get(name)
        if target is None or not target.store_id:
            return
        pins = await self.pins(target, [])
        try:  # only what it may re-validate counts: a session would refuse the rest (session_request.allowed)
            mine = session_request.allowed(tuple(pins), target.cfg.tuner.families, name, kind="revalidate")
        except DaemonError:
            return
        pins = {f: pins[f] for f in mine}
        async with self.store() as db:
            done = [r for r in await db.runs.find(st.owner, status=("done",), target=name, limit=200)
                    if r["kind"] == "revalidate" and r["ended_at"]]
            last = max((r["ended_at"] for r in done), default=None)
            if last is None:
                made = [s.started_at for s in await db.sessions.newest(target=target.store_id, limit=200)
                        if s.id in {p.session_id for p in pins.values()}]
                last = min(made, default=None)
        due = st.cfg.daemon.revalidate_every.delta
        if last is not None and datetime.now(UTC) - datetime.fromisoformat(last) < due:
            return
        await self.enqueue(name, "revalidate", reason=f"every {st.cfg.daemon.revalidate_every}")


def _import_session_stack() -> None:
    for name in ("tuner.session.stored", "tuner.session.runner", "tuner.optimiser.gp", "skopt", "sklearn.gaussian_process",
                 "scipy.stats"):
        importlib.import_module(name)
    for family in REGISTRY.names():
        REGISTRY.get(family)


def _outcome(report: Any) -> str:
    parts = []
    for r in report.recommendations:
        where = f" ({r.object})" if r.object else ""
        if r.decision == "change":
            e = r.effect
            ci = f", CI [{e.ci95[0]:.2f}, {e.ci95[1]:.2f}]" if e else ""
            parts.append(f"{r.knob}{where}: change {r.current} -> {r.recommended}{ci}")
        else:
            parts.append(f"{r.knob}{where}: keep {r.current}")
    return "; ".join(parts) or "no recommendation: " + "; ".join(f"{f.family} {f.status}" for f in report.families)
