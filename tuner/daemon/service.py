"""The daemon: one process, one lock on the state directory, an apscheduler that only *asks* for work, and one
worker that does it — a session, a re-probe of some families, or a re-validation — one at a time, inside the
maintenance windows (or at once, when POST /v1/sessions asks).

Every piece of work is a row of the store's ``daemon_runs`` before it starts (queued → running → done, failed,
interrupted, or queued again when its window closed or the daemon stopped). A daemon killed mid-session finds its
row 'running' when it starts again: the journal is restored first, the row becomes 'interrupted', and the same
work is queued again.

The drift check is cheap (:mod:`tuner.daemon.drift`: one connection, some catalogue and sysfs reads). Its
baseline is kept in the state directory, so a change made while the daemon was down is noticed too; after every
run of tuner's own the baseline is taken again (a session restarts the server and changes what it restores).
Nothing is ever applied to a target by the daemon.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tuner.config import Config, is_loopback, listen_address, state_dir
from tuner.configured import load_config
from tuner.daemon import session_request
from tuner.daemon.residency import lock_working_set
from tuner.daemon.token import read_token
from tuner.durations import parse_duration
from tuner.errors import ConfigError, DaemonError, TunerError
from tuner.log import get_logger
from tuner.stop import STOP
from tuner.timespec import local_timezone, parse_crontab, parse_windows

log = get_logger("tuner.daemon")

STOP_WITHIN_S = 30.0
IDLE_POLL_S = 60.0  # the worker looks at its queue at least this often (windows open, timers)
KINDS = ("session", "reprobe", "revalidate")
MAX_ATTEMPTS = 3  # a run stopped by its window, the daemon's stop or a crash is queued again at most this often


# -- targets --------------------------------------------------------------------------------------------------
@dataclass
class Target:
    """One server the daemon tunes, with the configuration its sessions run under."""

    name: str
    cfg: Config
    sandbox: bool = False
    servers: Any = None  # the kept sandbox's servers (tuner.target.server.Servers)
    store_id: str | None = None  # the store's id for it, once known (system identifier + data directory)
    label: str = ""

    @property
    def dsn(self) -> str | None:
        return self.servers.dsn if self.servers is not None else self.cfg.target.dsn


def targets_of(cfg: Config, *, sandbox: bool) -> list[Target]:
    """``[target]`` as "default" (or the sandbox), then every ``[[daemon.targets]]``."""
    out: list[Target] = []
    if sandbox:
        out.append(Target("sandbox", cfg, sandbox=True))
    elif cfg.target.dsn or any(k in os.environ for k in ("PGHOST", "PGSERVICE", "PGDATABASE", "PGPORT")):
        out.append(Target("default", cfg))
    for t in cfg.daemon.targets:
        if any(o.name == t.name for o in out):
            raise ConfigError(f"[[daemon.targets]] name {t.name!r} is taken by [target]",
                              hint="give it another name")
        tuner = cfg.tuner.model_copy(update={"families": t.families, **({"policy": t.policy} if t.policy else {})})
        target = cfg.target.model_copy(update={"dsn": t.dsn, "restart_command": t.restart_command})
        out.append(Target(t.name, cfg.model_copy(update={"tuner": tuner, "target": target})))
    if not out:
        raise ConfigError("the daemon has no target: set [target] dsn (or PGHOST), add [[daemon.targets]], "
                          "or use --sandbox", hint="tuner daemon --sandbox tries it on a throwaway PostgreSQL")
    return out


def check(cfg: Config, *, sandbox: bool) -> list[str]:
    """Everything ``--check-config`` and a reload validate beyond the schema; the summary lines."""
    targets = targets_of(cfg, sandbox=sandbox)
    token = read_token(cfg)
    host, port = listen_address(cfg.daemon.listen)
    if not is_loopback(host) and token is None:
        raise ConfigError(f"[daemon] listen = {cfg.daemon.listen!r} is not loopback and there is no token",
                          hint="set [daemon] token_file")
    state_dir(cfg)
    from tuner.policy import load_policy

    for t in targets:
        load_policy(t.cfg.tuner.policy, config_dir=t.cfg.source.parent if t.cfg.source else None)
    windows = parse_windows(cfg.daemon.windows)
    return [
        f"listen {host}:{port} ({'token required for every endpoint but /healthz' if not is_loopback(host) else 'loopback'}"
        f"{'; POST allowed with the token' if token else '; read-only: no token_file'})",
        f"schedule {cfg.daemon.schedule or 'none'}; windows {', '.join(cfg.daemon.windows) or 'any time'} "
        f"(now {'open' if windows.contains(datetime.now(UTC)) else 'closed'})",
        f"drift check every {cfg.daemon.drift_check_every}; re-validation every {cfg.daemon.revalidate_every}",
        *(f"target {t.name}: {'a sandbox of its own' if t.sandbox else _shown(t.dsn)}; families "
          f"{', '.join(t.cfg.tuner.families)}; policy {t.cfg.tuner.policy}" for t in targets),
    ]


def _shown(dsn: str | None) -> str:
    from tuner.target.connection import redact

    return " ".join(redact(dsn).split()) if dsn else "PG* environment"


# -- progress: what the daemon says it is doing ---------------------------------------------------------------
@dataclass
class Current:
    run: dict[str, Any]
    target: str
    phase: str = "starting"
    step: str = ""
    probes: int = 0
    task: asyncio.Task[Any] | None = None
    stop_reason: str | None = None


class DaemonProgress:
    """The runner's progress, as systemd STATUS= and /v1/sessions/ID."""

    def __init__(self, daemon: Daemon, current: Current) -> None:
        self.daemon, self.current = daemon, current

    def phase(self, name: str, total: int | None) -> None:
        self.current.phase, self.current.step = name, ""
        self.daemon.say(f"{self.current.run['kind']} {self.current.run['id']} on {self.current.target}: {name}")

    def advance(self, text: str) -> None:
        self.current.step = text
        if self.current.phase != "sandbox":
            self.current.probes += 1
            self.daemon.metrics.probes.labels(self.current.target).inc()


# -- the daemon ---------------------------------------------------------------------------------------------------
@dataclass
class Daemon:
    cfg: Config
    config_path: Path | None = None
    overrides: Mapping[str, Any] = field(default_factory=dict)
    sandbox: bool = False

    def __post_init__(self) -> None:
        from tuner.daemon.metrics import Metrics
        from tuner.daemon.systemd import Notifier

        self.metrics = Metrics()
        self.notifier = Notifier()
        self.targets = {t.name: t for t in targets_of(self.cfg, sandbox=self.sandbox)}
        self._token = read_token(self.cfg)
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self._current: Current | None = None
        self._scheduler: Any = None
        self._store_ok: str | None = None
        self._started = time.time()
        self._bound: tuple[str, int] | None = None  # the address the API is bound to (a reload cannot move it)
        self._journal_left: str | None = None  # what the journal still holds after a run (for /readyz)
        self._reload_pending = False  # a SIGHUP before the scheduler ran: reloaded once it does
        self._drift_lock = asyncio.Lock()  # one drift check at a time (the scheduler's and the one after a run)
        self.owner = daemon_owner(self.cfg)
        for name in self.targets:
            self.metrics.target(name)

    # -- API backend ------------------------------------------------------------------------------------------
    def token(self) -> str | None:
        return self._token

    def token_everywhere(self) -> bool:
        # From the address actually bound, not from a reloaded file (a reload cannot move the socket).
        host = (self._bound or listen_address(self.cfg.daemon.listen))[0]
        return not is_loopback(host)

    def loopback_hosts(self) -> frozenset[str] | None:
        """Host headers accepted on a loopback socket (against DNS rebinding); None: any (off loopback, where every
        endpoint but /healthz needs the token anyway)."""
        host, port = self._bound or listen_address(self.cfg.daemon.listen)
        if not is_loopback(host):
            return None
        names = {"localhost", "127.0.0.1", "[::1]", host if ":" not in host else f"[{host}]"}
        return frozenset({*names, *(f"{n}:{port}" for n in names)})

    def ready(self) -> tuple[bool, str]:
        if self._scheduler is None or not self._scheduler.running:
            return False, "the scheduler is not running"
        if self._store_ok:
            return False, self._store_ok
        if self._journal_left:
            return False, f"{self._journal_left}; run 'tuner restore'"
        return True, self._status

    def metrics_text(self) -> tuple[bytes, str]:
        return self.metrics.render(), self.metrics.content_type

    async def recommendations(self, target: str | None) -> dict[str, Any]:
        from tuner.store import open_store

        if target is not None and target not in self.targets:
            raise DaemonError(f"no target {target!r}", hint=f"targets: {', '.join(self.targets)}", status=404)
        out = []
        async with open_store(self.cfg) as db:
            assert db is not None
            for t in self.targets.values():
                if target and t.name != target:
                    continue
                accepted = await db.accepted(t.store_id) if t.store_id else []
                recs: list[dict[str, Any]] = []
                if accepted:  # as the JSON report has them: with apply_sql, rollback_sql and host commands
                    from tuner.emit.json import to_dict

                    report = (await db.report(accepted[0][0])).model_copy(
                        update={"recommendations": [r for _, r in accepted]})
                    recs = [rec | {"session_id": sid}
                            for rec, (sid, _) in zip(to_dict(report)["recommendations"], accepted, strict=True)]
                out.append({"target": t.name, "target_id": t.store_id, "recommendations": recs})
        return {"generated_at": _now(), "targets": out}

    async def rendered(self, target: str, fmt: str) -> dict[str, str]:
        """The accepted recommendations rendered by an emitter, with the newest session's header. With none in
        force (never any, or all withdrawn) the files say so and set nothing — a config-management pull then
        removes what an earlier pull put in place."""
        from tuner import emit
        from tuner.store import open_store

        if fmt not in emit.FORMATS:
            raise DaemonError(f"unknown format {fmt!r}", hint=f"formats: {', '.join(emit.FORMATS)}")
        t = self.targets.get(target)
        if t is None:
            raise DaemonError(f"no target {target!r}", hint=f"targets: {', '.join(self.targets)}", status=404)
        async with open_store(self.cfg) as db:
            assert db is not None
            accepted = await db.accepted(t.store_id) if t.store_id else []
            latest = await db.sessions(target=t.store_id, limit=1) if t.store_id else []
            if not latest:
                raise DaemonError(f"target {target} has no stored session yet", status=409,
                                  hint="GET /v1/sessions shows what ran; POST /v1/sessions runs a session now")
            report = await db.report(latest[0].id)
        report = report.model_copy(update={"recommendations": [r for _, r in accepted]})
        return emit.render(report, fmt)

    async def sessions(self, limit: int) -> dict[str, Any]:
        from tuner.store import open_store

        async with open_store(self.cfg) as db:
            assert db is not None
            runs = await db.runs(self.owner, limit=limit)
            stored = await db.sessions(limit=limit)
        for run in runs:
            self._live(run)
        return {"runs": runs, "sessions": [_summary(s) for s in stored]}

    async def session(self, session_id: str) -> dict[str, Any] | None:
        from tuner.store import StoreError, open_store

        if not session_id or not all(c in "0123456789abcdef" for c in session_id) or len(session_id) > 32:
            return None
        async with open_store(self.cfg) as db:
            assert db is not None
            run = next(iter(r for r in await db.runs(self.owner, limit=1000) if r["id"] == session_id), None)
            try:
                report = (await db.report(session_id)).model_dump(mode="json")
            except (ConfigError, StoreError):
                report = None
        if run is None and report is None:
            return None
        if run is not None:
            self._live(run)
        return {"run": run, "report": report}

    async def drift(self, limit: int) -> dict[str, Any]:
        from tuner.store import open_store

        async with open_store(self.cfg) as db:
            assert db is not None
            return {"events": await db.all_drift_events(limit=limit)}

    async def request_session(self, body: dict[str, Any]) -> dict[str, Any]:
        req = session_request.parse(body, {n: t.cfg.tuner.families for n, t in self.targets.items()})
        run = await self.enqueue(req.target, req.kind, reason="requested over the API", families=req.families,
                                 forced=req.forced)
        return {"id": run["id"], "status": "queued", "target": req.target, "kind": req.kind,
                "in_window": not req.forced, "already_queued": bool(run.get("already_queued"))}

    def _live(self, run: dict[str, Any]) -> None:
        cur = self._current
        if cur is not None and cur.run["id"] == run["id"]:
            run["progress"] = {"phase": cur.phase, "step": cur.step, "probes": cur.probes}

    # -- queue ------------------------------------------------------------------------------------------------
    async def enqueue(self, target: str, kind: str, *, reason: str, families: list[str] | tuple[str, ...] = (),
                      knobs: list[str] | tuple[str, ...] = (), forced: bool = False) -> dict[str, Any]:
        """Queue a run unless the same work is queued already (a schedule that fires twice queues it once)."""
        from tuner.store import open_store

        async with open_store(self.cfg) as db:
            assert db is not None
            # The same work queued already is not queued twice (a schedule that fires while its session waits for
            # the window; a client that POSTs in a loop): the queued run is the answer.
            for run in await db.runs(self.owner, status=("queued",), target=target):
                if (run["kind"] == kind and sorted(run["families"]) == sorted(families)
                        and sorted(run["knobs"]) == sorted(knobs) and run["forced"] == forced):
                    run["already_queued"] = True
                    return run
            run = {"id": uuid.uuid4().hex[:12], "owner": self.owner, "target": target,
                   "target_id": self.targets[target].store_id, "kind": kind, "families": list(families),
                   "knobs": list(knobs), "reason": reason, "forced": forced, "attempt": 1, "status": "queued"}
            await db.add_run(run)
        log.info("daemon.queued", run=run["id"], target=target, kind=kind, reason=reason, forced=forced)
        self._wake.set()
        return run

    async def _next(self) -> tuple[dict[str, Any], bool] | None:
        """The oldest queued run that may start now (forced, or its window is open), and whether it is forced."""
        from tuner.store import open_store

        async with open_store(self.cfg) as db:
            assert db is not None
            queued = await db.runs(self.owner, status=("queued",), limit=1000)
        now = datetime.now(UTC)
        for run in reversed(queued):  # oldest first
            if run["target"] not in self.targets:
                continue
            if run["forced"] or self.windows().contains(now):
                return run, bool(run["forced"])
        return None

    def windows(self) -> Any:
        return parse_windows(self.cfg.daemon.windows)

    async def _worker(self) -> None:
        while not self._stopping.is_set():
            try:
                nxt = await self._next()
            except TunerError as exc:
                self._store_ok = str(exc)
                log.error("daemon.store", error=str(exc))
                nxt = None
            else:
                self._store_ok = None
            if nxt is None:
                self.say(self._idle_status())
                self._wake.clear()
                wait = IDLE_POLL_S  # an enqueue wakes the worker at once; this is for windows that open
                now = datetime.now(UTC)  # (windows answer in UTC: differences across a clock change stay right)
                windows = self.windows()
                if not windows.contains(now):
                    wait = max(1.0, min(wait, (windows.next_open(now) - now).total_seconds() + 1))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=wait)
                continue
            try:
                await self._execute(*nxt)
            except Exception:  # noqa: BLE001 — a store that failed around a run: logged, and the worker goes on
                log.exception("daemon.worker_error", run=nxt[0]["id"])
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), timeout=5)

    async def _execute(self, run: dict[str, Any], forced: bool) -> None:
        from tuner.store import open_store

        target = self.targets[run["target"]]
        if self._stopping.is_set():
            return  # it stays queued for the next start
        async with open_store(self.cfg) as db:
            assert db is not None
            await db.update_run(run["id"], status="running", started=True)
        current = Current(run=run, target=target.name)
        self._current = current
        self.metrics.running.labels(target.name).set(1)
        closer: asyncio.TimerHandle | None = None
        if not forced:
            now = datetime.now(UTC)
            closes = self.windows().closes_at(now)
            if closes is not None:
                local = closes.astimezone(local_timezone())
                closer = asyncio.get_running_loop().call_later(
                    max(0.0, (closes - now).total_seconds()), self._stop_current,
                    f"its maintenance window closed at {local:%H:%M}")
        STOP.reset()
        current.task = asyncio.create_task(self._session(target, run, current))
        if self._stopping.is_set():  # a stop that came while the run was being marked running
            self._stop_current("the daemon is stopping")
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
            self.metrics.running.labels(target.name).set(0)
            self.metrics.runs.labels(target.name, run["kind"], status).inc()
            left = await asyncio.to_thread(self._recover_journal)
            if left:
                detail = f"{detail}; {left}"
        try:
            async with open_store(self.cfg) as db:
                assert db is not None
                await db.update_run(run["id"], status=status, detail=detail, target_id=target.store_id, ended=True)
                if status == "deferred":
                    await self._again(db, run, status, detail)
        except TunerError as exc:
            log.error("daemon.store", error=str(exc))
        log.info("daemon.run_ended", run=run["id"], target=target.name, kind=run["kind"], status=status,
                 detail=detail)
        try:
            await self._refresh(target)
            async with self._drift_lock:  # no scheduled drift check between the run's end and this one
                self._current = None
                if not self._stopping.is_set():
                    await self._after_run(target)
        except Exception:  # noqa: BLE001 — the drift check's own failure must not end the worker
            log.exception("daemon.drift_failed", target=target.name)
        finally:
            self._current = None

    async def _again(self, db: Any, run: dict[str, Any], status: str, detail: str | None) -> None:
        """Queue a stopped or interrupted run again, as a new run (its id is its session's id), for a window: at
        most :data:`MAX_ATTEMPTS` times."""
        attempt = int(run.get("attempt") or 1) + 1
        if attempt > MAX_ATTEMPTS:
            log.warning("daemon.gave_up", run=run["id"], attempts=attempt - 1)
            await db.update_run(run["id"], status=status,
                                detail=f"{detail}; not queued again after {attempt - 1} attempts")
            return
        base = run["reason"].split(" (attempt ")[0]
        again = dict(run, id=uuid.uuid4().hex[:12], owner=self.owner, status="queued", requested_at=None,
                     started_at=None, ended_at=None, detail=None, attempt=attempt, forced=False,
                     reason=f"{base} (attempt {attempt}, again after {status} {run['id']})")
        await db.add_run(again)

    def _recover_journal(self) -> str | None:
        """Whatever a run could not put back (a server restarting as it was stopped), tried once more now."""
        from tuner.actuate import Journal, SysfsWriter

        try:
            journal = Journal(state_dir(self.cfg), writer=SysfsWriter(self.cfg.readahead.helper_command))
            failed = [r.sentence() for r in journal.recover() if not r.ok]
        except TunerError as exc:
            log.error("daemon.journal", error=str(exc))
            return f"the journal could not be restored: {exc}"
        if failed:
            self._journal_left = f"{len(failed)} journal entries could not be put back, first {failed[0]}"
            return self._journal_left
        self._journal_left = None
        return None

    def _stop_current(self, reason: str) -> None:
        cur = self._current
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
        log.info("daemon.code_locked", mib=round(locked.bytes_locked / (1 << 20), 1), problem=locked.problem)
        from tuner.policy import load_policy
        from tuner.runner import recommend
        from tuner.store import open_store

        cfg = target.cfg
        policy = load_policy(cfg.tuner.policy, config_dir=cfg.source.parent if cfg.source else None)
        policy = policy.for_daemon()  # longer confirmations: time is cheap in a maintenance window
        families = session_request.allowed(run["families"], cfg.tuner.families, target.name)
        async with open_store(self.cfg) as db:
            assert db is not None
            pins = None
            if run["kind"] == "revalidate":
                pins = await self._pins(db, target, run["knobs"])
                if not pins:
                    raise DaemonError("nothing to re-validate: the target has no accepted recommendation of a "
                                      "setting tuner can re-validate (effective_io_concurrency, WAL settings)")
                families = tuple(pins)
            report = await recommend(cfg, policy, use_sandbox=target.sandbox, families=families, store=db,
                                     session_id=run["id"], where=target.servers, pins=pins,
                                     progress=DaemonProgress(self, current))
            fp = report.target.fingerprint or {}
            target.store_id = _store_id(report.target.system_identifier, fp, target)
            await db.save(report, fp, kind=run["kind"])
        return report

    async def _pins(self, db: Any, target: Target, knobs: list[str]) -> dict[str, Any]:
        from tuner.families.base import Pin

        if not target.store_id:
            return {}
        family_of = _family_of()
        grouped: dict[str, dict[str, Any]] = {}
        for sid, r in await db.accepted(target.store_id):
            if not _pinnable(r, family_of) or (knobs and r.knob not in knobs):
                continue
            fam = family_of[r.knob]
            g = grouped.setdefault(fam, {"sid": sid, "cand": {}, "base": {}, "near": {}})
            g["cand"][r.knob], g["base"][r.knob] = r.recommended, r.current
            if r.near_optimal:
                g["near"][r.knob] = tuple(r.near_optimal)
        return {fam: Pin(g["sid"], g["cand"], g["base"], g["near"]) for fam, g in grouped.items()}

    async def _refresh(self, target: Target) -> None:
        """The target's recommendation gauges from the store."""
        from tuner.store import open_store

        if not target.store_id:
            return
        try:
            async with open_store(self.cfg) as db:
                assert db is not None
                accepted = await db.accepted(target.store_id)
                latest = await db.sessions(target=target.store_id, limit=1)
        except TunerError as exc:
            log.error("daemon.store", error=str(exc))
            return
        self.metrics.set_recommendations(target.name, [r for _, r in accepted])
        if latest:
            self.metrics.last_session.labels(target.name).set(datetime.fromisoformat(latest[0].started_at).timestamp())

    # -- drift --------------------------------------------------------------------------------------------------
    def _baseline_path(self, target: Target) -> Path:
        return state_dir(self.cfg) / f"drift-{target.name}.json"

    async def _observe(self, target: Target) -> dict[str, Any]:
        from tuner.daemon.drift import observe

        return await observe(target.dsn, timeout_s=target.cfg.target.connect_timeout_s)

    async def _after_run(self, target: Target) -> None:
        """After a run of tuner's own: its restarts are no drift (the baseline takes the new postmaster start and
        timeline), but anything else that differs now was changed by someone else, during the run — a normal drift
        check right away records it. (A run puts back only what it changed itself, as it found it.)"""
        path = self._baseline_path(target)
        try:
            fp = await self._observe(target)
            before = json.loads(path.read_text())
        except (TunerError, OSError, ValueError):
            return
        for key in ("postmaster_start", "timeline"):
            if key in (fp.get("server") or {}) and isinstance(before.get("server"), dict):
                before["server"][key] = fp["server"][key]
        self._save_baseline(target, before)
        await self._drift_check(target.name)  # (the caller holds the drift lock)

    def _save_baseline(self, target: Target, fp: dict[str, Any]) -> None:
        from tuner.files import atomic_write

        atomic_write(self._baseline_path(target), json.dumps(fp, sort_keys=True, default=str),
                     dir_mode=0o700)  # mkstemp: the file is 0600

    async def drift_check(self, name: str) -> None:
        """Compare the target's fingerprint with the baseline; record a change and queue what it calls for. None
        runs while a run of tuner's own is under way on any target (targets may share a device), and only one at a
        time (the scheduler's, and the one right after a run)."""
        if self._current is not None or self._stopping.is_set():
            return  # a session of tuner's own changes what it probes; its own restarts are absorbed after it
        async with self._drift_lock:
            await self._drift_check(name)

    async def _drift_check(self, name: str) -> None:
        from tuner.daemon.drift import action, changes_json, compare
        from tuner.store import open_store

        target = self.targets.get(name)
        if target is None:
            return
        try:
            fp = await self._observe(target)
        except (TunerError, OSError) as exc:
            log.warning("daemon.drift_unavailable", target=name, error=str(exc))
            return
        if self._current is not None:
            return
        await self._identify(target, fp)
        path = self._baseline_path(target)
        try:
            before = json.loads(path.read_text())
        except (OSError, ValueError):
            before = None
        self._save_baseline(target, fp)
        if before is None:
            log.info("daemon.drift_baseline", target=name)
            return
        changes = compare(before, fp)
        if not changes:
            return
        async with open_store(self.cfg) as db:
            assert db is not None
            accepted = await db.accepted(target.store_id) if target.store_id else []
            act = action(changes, _recommended(accepted))
            todo = self._answer(target, act, accepted)
            said = f"{act.kind}: {act.reason}" + (f" ({todo[1]})" if todo[1] else "")
            if target.store_id:
                await db.record_drift(target.store_id, changes_json(changes), said)
        self.metrics.drift_events.labels(name).inc()
        log.warning("daemon.drift", target=name, changes=[c.sentence() for c in changes], action=act.kind,
                    reason=act.reason, note=todo[1])
        for kind, families, knobs in todo[0]:
            await self.enqueue(name, kind, reason=f"drift: {act.reason}", families=families, knobs=knobs)

    def _answer(self, target: Target, act: Any, accepted: list[tuple[str, Any]],
                ) -> tuple[list[tuple[str, list[str], list[str]]], str]:
        """The runs a drift action calls for on this target, and a note on what was changed from the action:
        only the target's own families are probed, and a recommendation tuner cannot re-validate by pinning it
        (a device's readahead, a tablespace's setting, a setting that is not a number) is re-probed instead."""
        from tuner.daemon.drift import recommendation_key

        mine = set(target.cfg.tuner.families)
        family_of = _family_of()
        pinnable = {recommendation_key(r.knob, r.object) for _, r in accepted if _pinnable(r, family_of)}
        runs: list[tuple[str, list[str], list[str]]] = []
        notes: list[str] = []
        if act.kind == "session":
            return [("session", [], [])], ""
        families = [f for f in act.families if f in mine] if act.families else []
        knobs = [k for k in act.knobs if k in pinnable]
        for k in act.knobs:
            if k not in pinnable:
                fam = "readahead" if ":" in k or k == "read_ahead_kb" else family_of.get(k, "")
                if fam in mine and fam not in families:
                    families.append(fam)
                    notes.append(f"{k} is re-probed: tuner re-validates only server-wide numeric settings")
        if act.kind == "reprobe" and act.families and not families:
            notes.append(f"not probed: {', '.join(act.families)} is not among this target's families")
        elif act.kind == "reprobe" or families:
            runs.append(("reprobe", families, []))
        if knobs:
            runs.append(("revalidate", [], knobs))
        return runs, "; ".join(notes)

    async def _identify(self, target: Target, fp: dict[str, Any]) -> None:
        from tuner.store import open_store

        sysid = (fp.get("server") or {}).get("system_identifier")
        sid = _store_id(sysid, fp, target)
        if sid != target.store_id:
            target.store_id = sid
            async with open_store(self.cfg) as db:
                assert db is not None
                await db.ensure_target(sid, sysid, fp.get("data_directory"), _label(target))
            await self._refresh(target)

    async def revalidate(self, name: str) -> None:
        """Queue a re-validation when one is due: ``revalidate_every`` after the last one (or after the session
        that made the oldest recommendation in force), counted from the store, not from this process's start —
        a daemon that is reloaded or restarted daily still re-validates weekly."""
        from tuner.store import open_store

        target = self.targets.get(name)
        if target is None or not target.store_id:
            return
        async with open_store(self.cfg) as db:
            assert db is not None
            pins = await self._pins(db, target, [])
            if not pins:
                return
            done = [r for r in await db.runs(self.owner, status=("done",), target=name, limit=200)
                    if r["kind"] == "revalidate" and r["ended_at"]]
            last = max((r["ended_at"] for r in done), default=None)
            if last is None:
                made = [s.started_at for s in await db.sessions(target=target.store_id, limit=200)
                        if s.id in {p.session_id for p in pins.values()}]
                last = min(made, default=None)
        due = parse_duration(self.cfg.daemon.revalidate_every)
        if last is not None and (datetime.now(UTC) - datetime.fromisoformat(last)).total_seconds() < due:
            return
        await self.enqueue(name, "revalidate", reason=f"every {self.cfg.daemon.revalidate_every}")

    # -- schedule ---------------------------------------------------------------------------------------------
    def _schedule(self) -> None:
        from apscheduler.triggers.interval import IntervalTrigger

        sch = self._scheduler
        for job in sch.get_jobs():
            job.remove()
        common = dict(max_instances=1, coalesce=True, misfire_grace_time=300, replace_existing=True)
        drift_s = parse_duration(self.cfg.daemon.drift_check_every)
        reval_s = parse_duration(self.cfg.daemon.revalidate_every)
        for name in self.targets:
            if self.cfg.daemon.schedule:
                sch.add_job(self.enqueue, parse_crontab(self.cfg.daemon.schedule), id=f"session:{name}",
                            args=[name, "session"], kwargs={"reason": f"schedule {self.cfg.daemon.schedule}"},
                            **common)
            sch.add_job(self.drift_check, IntervalTrigger(seconds=drift_s), id=f"drift:{name}", args=[name],
                        next_run_time=datetime.now(UTC), **common)
            # Checked hourly (or as often as the interval is shorter); due is counted from the store.
            sch.add_job(self.revalidate, IntervalTrigger(seconds=min(reval_s, 3600.0)), id=f"revalidate:{name}",
                        args=[name], **common)

    @property
    def _status(self) -> str:
        return self._idle_status()

    def _idle_status(self) -> str:
        if self._current is not None:
            c = self._current
            return f"{c.run['kind']} {c.run['id']} on {c.target}: {c.phase}"
        jobs = [j for j in (self._scheduler.get_jobs() if self._scheduler else []) if j.id.startswith("session:")]
        nxt = min((j.next_run_time for j in jobs if j.next_run_time), default=None)
        return f"idle; next scheduled session {nxt:%Y-%m-%d %H:%M %Z}" if nxt else "idle; no scheduled session"

    def say(self, status: str) -> None:
        self.notifier.status(status)

    # -- reload ---------------------------------------------------------------------------------------------
    def _hup(self) -> None:
        if self._scheduler is None or not self._scheduler.running:
            self._reload_pending = True
            log.info("daemon.reload_deferred", detail="SIGHUP while starting: the configuration is read once it runs")
            return
        self.reload()

    def reload(self) -> None:
        """SIGHUP: read and validate the configuration again; a bad one keeps the old one running. What only a
        restart can change (the API's address, the state directory, the store) makes the reload fail."""
        self._reload_pending = False
        self.notifier.reloading("reloading the configuration")
        try:
            cfg = load_config(self.config_path, overrides=self.overrides)
            check(cfg, sandbox=self.sandbox)
            targets = {t.name: t for t in targets_of(cfg, sandbox=self.sandbox)}
            token = read_token(cfg)
            fixed = [what for what, old, new in (
                ("[daemon] listen", self.cfg.daemon.listen, cfg.daemon.listen),
                ("the state directory", state_dir(self.cfg), state_dir(cfg)),
                ("[store]", self.cfg.store, cfg.store)) if old != new]
            if fixed:
                raise ConfigError(f"{' and '.join(fixed)} changed, which only a restart applies; the running "
                                  "configuration stays", hint="restart the daemon (systemctl restart tuner)")
        except TunerError as exc:
            self.metrics.reload_ok.set(0)
            log.error("daemon.reload_failed", error=str(exc), hint=exc.hint,
                      detail="the previous configuration stays in force")
            self.notifier.ready(f"reload failed ({exc}); running with the previous configuration")
            return
        for name, t in targets.items():
            old = self.targets.get(name)
            if old is not None and old.cfg.target.dsn == t.cfg.target.dsn:
                t.servers, t.store_id, t.label = old.servers, old.store_id, old.label
            elif old is not None:  # another server under the same name: its baseline and identity are not ours
                t.servers = old.servers
                self._baseline_path(t).unlink(missing_ok=True)
                self.metrics.set_recommendations(name, ())
            else:
                self.metrics.target(name)
        for name in set(self.targets) - set(targets):
            self.metrics.forget_target(name)
        self.cfg, self.targets, self._token = cfg, targets, token
        self._schedule()
        self.metrics.reload_ok.set(1)
        log.info("daemon.reloaded", targets=list(targets))
        self._wake.set()
        self.notifier.ready(self._idle_status())

    # -- life -------------------------------------------------------------------------------------------------
    def stop(self, signum: int) -> None:
        if not self._stopping.is_set():
            log.info("daemon.stop", signal=signal.Signals(signum).name)
            self.notifier.stopping(f"stopping ({signal.Signals(signum).name})")
        self._stopping.set()
        self._wake.set()
        self._stop_current(f"the daemon was stopped by {signal.Signals(signum).name}")

    async def run(self) -> int:
        from aiohttp import web
        from apscheduler.schedulers.asyncio import AsyncIOScheduler

        from tuner.actuate import Journal, SysfsWriter
        from tuner.daemon.api import make_runner
        from tuner.daemon.lockfile import DaemonLock
        from tuner.store import open_store

        sdir = state_dir(self.cfg)
        code = 0
        with DaemonLock(sdir):
            # Before anything else: whatever a killed session left is put back.
            journal = Journal(sdir, writer=SysfsWriter(self.cfg.readahead.helper_command))
            for r in journal.recover():
                log.warning("daemon.restored", detail=r.sentence())
            async with open_store(self.cfg) as db:
                if db is None:
                    raise ConfigError("the daemon needs its store ([store] enabled = false)",
                                      hint="remove [store] enabled = false; the daemon keeps its work there")
                for run in await db.runs(self.owner, status=("running",), limit=1000):
                    detail = "the daemon ended mid-run (killed or crashed); what it had changed was restored"
                    await db.update_run(run["id"], status="interrupted", detail=detail, ended=True)
                    self.metrics.runs.labels(run["target"], run["kind"], "interrupted").inc()
                    log.warning("daemon.interrupted", run=run["id"], target=run["target"])
                    if run["target"] in self.targets:
                        await self._again(db, run, "interrupted", detail)
            for t in self.targets.values():
                if t.sandbox:  # a new sandbox each start: the last one's fingerprint is no baseline for it
                    self._baseline_path(t).unlink(missing_ok=True)
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self.stop, sig)
            # Until the scheduler runs, a SIGHUP is remembered and acted on then (its default would end the process).
            loop.add_signal_handler(signal.SIGHUP, self._hup)
            async with contextlib.AsyncExitStack() as stack:
                for t in self.targets.values():
                    if t.sandbox:
                        t.servers = await stack.enter_async_context(self._sandbox(t))
                        t.label = _label(t)
                host, port = listen_address(self.cfg.daemon.listen)
                runner = make_runner(_Backend(self))
                await runner.setup()
                stack.push_async_callback(runner.cleanup)
                try:
                    await web.TCPSite(runner, host, port, reuse_address=True).start()
                except OSError as exc:
                    raise DaemonError(f"cannot listen on {self.cfg.daemon.listen}: {exc.strerror or exc}",
                                      hint="another process may hold the port; change [daemon] listen") from None
                self._bound = (host, port)
                self._scheduler = AsyncIOScheduler(timezone=local_timezone())
                self._schedule()
                self._scheduler.start()
                stack.callback(self._scheduler.shutdown, wait=False)
                if self._reload_pending:
                    self.reload()
                for t in self.targets.values():
                    await self._refresh(t)
                log.info("daemon.ready", listen=f"{host}:{port}", targets=list(self.targets), pid=os.getpid())
                self.notifier.ready(self._idle_status())
                watchdog = asyncio.create_task(self._watchdog())
                worker = asyncio.create_task(self._worker())
                stopped = asyncio.create_task(self._stopping.wait())
                done, _ = await asyncio.wait({worker, stopped}, return_when=asyncio.FIRST_COMPLETED)
                if worker in done:  # it ends only when asked to: anything else is a failure systemd should see
                    log.error("daemon.worker_died", error=repr(worker.exception()))
                    code = 1
                # Stop: the current run ends at once (its journal restored by the runner), then everything else.
                self._stop_current("the daemon is stopping")
                try:
                    await asyncio.wait_for(asyncio.shield(worker), timeout=STOP_WITHIN_S - 5)
                except (TimeoutError, asyncio.CancelledError, Exception):
                    worker.cancel()
                watchdog.cancel()
            for r in journal.recover():  # a belt to the runner's braces
                log.warning("daemon.restored", detail=r.sentence())
        log.info("daemon.stopped", exit_code=code)
        return code

    @contextlib.asynccontextmanager
    async def _sandbox(self, target: Target) -> Any:
        from tuner.target.server import servers

        self.say("creating the sandbox")
        quiet = _Quiet()  # (tuner.core.session's NullProgress would import the optimiser stack at start)
        async with servers(target.cfg, use_sandbox=True, progress=quiet, writable=True) as where:
            yield where

    async def _watchdog(self) -> None:
        interval = self.notifier.watchdog_interval_s
        if not interval:
            return
        while True:
            self.notifier.watchdog()
            await asyncio.sleep(interval)


class _Backend:
    """The daemon as the API sees it (keeps the API's names off the daemon's own)."""

    def __init__(self, daemon: Daemon) -> None:
        self.d = daemon

    def token(self) -> str | None:
        return self.d.token()

    def token_everywhere(self) -> bool:
        return self.d.token_everywhere()

    def loopback_hosts(self) -> frozenset[str] | None:
        return self.d.loopback_hosts()

    def ready(self) -> tuple[bool, str]:
        return self.d.ready()

    def metrics(self) -> tuple[bytes, str]:
        return self.d.metrics_text()

    async def recommendations(self, target: str | None) -> dict[str, Any]:
        return await self.d.recommendations(target)

    async def rendered(self, target: str, fmt: str) -> dict[str, str]:
        return await self.d.rendered(target, fmt)

    async def sessions(self, limit: int) -> dict[str, Any]:
        return await self.d.sessions(limit)

    async def session(self, session_id: str) -> dict[str, Any] | None:
        return await self.d.session(session_id)

    async def drift(self, limit: int) -> dict[str, Any]:
        return await self.d.drift(limit)

    async def request_session(self, body: dict[str, Any]) -> dict[str, Any]:
        return await self.d.request_session(body)


# -- helpers ------------------------------------------------------------------------------------------------------
class _Quiet:
    def phase(self, name: str, total: int | None) -> None:
        pass

    def advance(self, text: str) -> None:
        pass


def _import_session_stack() -> None:
    import importlib

    from tuner.families import REGISTRY

    for name in ("tuner.runner", "tuner.optimiser.gp", "skopt", "sklearn.gaussian_process", "scipy.stats"):
        importlib.import_module(name)
    for family in REGISTRY.names():
        REGISTRY.get(family)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _label(target: Target) -> str:
    if target.sandbox:
        return f"sandbox of tuner daemon ({target.name})"
    return _shown(target.dsn)


def _store_id(sysid: str | None, fp: Mapping[str, Any], target: Target) -> str:
    from tuner.store import target_id

    return target_id(sysid, fp.get("data_directory"), fp.get("label") or _label(target))


def _family_of() -> dict[str, str]:
    from tuner.knobs import catalog

    cat = catalog.load()
    from tuner.families import REGISTRY

    return {k: fam for fam in REGISTRY.names() for k in cat.names(fam)}


def _pinnable(r: Any, family_of: Mapping[str, str]) -> bool:
    """Whether a recommendation can be re-validated by a pin: a server-wide number of a family that honours pins."""
    return (r.scope == "system" and family_of.get(r.knob) in ("concurrency", "wal")
            and isinstance(r.recommended, int) and isinstance(r.current, int))


def daemon_owner(cfg: Config) -> str:
    """Which daemon a queued run belongs to: its host and state directory (daemons may share a store)."""
    import hashlib
    import socket

    return hashlib.sha256(f"{socket.gethostname()}|{state_dir(cfg)}".encode()).hexdigest()[:16]


def _recommended(accepted: list[tuple[str, Any]]) -> dict[str, Any]:
    """Accepted recommendations keyed as :func:`tuner.daemon.drift.action` wants them."""
    from tuner.daemon.drift import recommendation_key

    return {recommendation_key(r.knob, r.object): r.recommended for _, r in accepted}


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


def _summary(s: Any) -> dict[str, Any]:
    return {"id": s.id, "target_id": s.target_id, "target": s.target, "started_at": s.started_at,
            "duration_s": s.duration_s, "kind": s.kind, "server_version": s.server_version, "policy": s.policy,
            "probes": s.probes, "decisions": s.decisions}
