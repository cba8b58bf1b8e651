"""The daemon: one process, one lock on the state directory, an apscheduler that only *asks* for work, and one
worker that does it (:mod:`tuner.daemon.worker`) — a session, a re-probe of some families, or a re-validation —
one at a time, inside the maintenance windows (or at once, when POST /v1/sessions asks). The API reads through
:mod:`tuner.daemon.queries`; drift is watched by :mod:`tuner.daemon.watch`. :class:`Daemon` itself is the
lifecycle: start-up recovery, signals, systemd notify, the schedule and reload. Nothing is ever applied to a target
by the daemon.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiohttp import web
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.interval import IntervalTrigger

from tuner.actuate import Journal, SysfsWriter
from tuner.settings.config import Config, is_loopback, listen_address, state_dir
from tuner.settings.config_load import load_config
from tuner.daemon import upcoming
from tuner.daemon.api import make_runner
from tuner.daemon.daemon_lock import DaemonLock
from tuner.daemon.queries import Queries
from tuner.daemon.state import DaemonState, Target, daemon_owner, label, shown, targets_of
from tuner.daemon.token import read_token
from tuner.daemon.watch import DriftWatch
from tuner.daemon.worker import Worker
from tuner.errors import ConfigError, DaemonError, TunerError
from tuner.log import get_logger
from tuner.settings.policy import load_policy
from tuner.target.server import servers
from tuner.settings.schedule import local_timezone

log = get_logger("tuner.daemon")

__all__ = ["Daemon", "Target", "check", "daemon_owner", "read_token", "schedule_warning", "targets_of"]

STOP_WITHIN_S = 30.0


def check(cfg: Config, *, sandbox: bool) -> list[str]:
    """Everything ``--check-config`` and a reload validate beyond the schema; the summary lines."""
    targets = targets_of(cfg, sandbox=sandbox)
    token = read_token(cfg)
    host, port = listen_address(cfg.daemon.listen)
    if not is_loopback(host) and token is None:
        raise ConfigError(f"[daemon] listen = {cfg.daemon.listen!r} is not loopback and there is no token",
                          hint="set [daemon] token_file")
    state_dir(cfg)
    for t in targets:
        load_policy(t.cfg.tuner.policy, config_dir=t.cfg.source.parent if t.cfg.source else None)
    windows = cfg.daemon.windows
    schedule = cfg.daemon.schedule
    trigger = schedule.trigger if schedule else None
    now = datetime.now(UTC)
    return [
        f"listen {host}:{port} ({'token required for every endpoint but /healthz' if not is_loopback(host) else 'loopback'}"
        f"{'; POST allowed with the token' if token else '; read-only: no token_file'})",
        f"schedule {cfg.daemon.schedule or 'none'}; windows {', '.join(windows.texts) or 'any time'} "
        f"(now {'open' if windows.contains(datetime.now(UTC)) else 'closed'})",
        f"drift check every {cfg.daemon.drift_check_every}; re-validation every {cfg.daemon.revalidate_every}",
        *upcoming.lines(schedule.text if schedule else None, trigger, windows, str(cfg.daemon.drift_check_every),
                        str(cfg.daemon.revalidate_every), cfg.daemon.revalidate_every.seconds, now),
        *(f"target {t.name}: {'a sandbox of its own' if t.sandbox else shown(t.dsn)}; families "
          f"{', '.join(t.cfg.tuner.families)}; policy {t.cfg.tuner.policy}" for t in targets),
    ]


def schedule_warning(cfg: Config) -> str | None:
    """One sentence when ``[daemon] schedule`` never fires inside ``[daemon] windows``, else None."""
    schedule = cfg.daemon.schedule
    return upcoming.never_inside(schedule.text if schedule else None, schedule.trigger if schedule else None,
                                 cfg.daemon.windows, datetime.now(UTC))


@dataclass
class Daemon:
    cfg: Config
    config_path: Path | None = None
    overrides: Mapping[str, Any] = field(default_factory=dict)
    sandbox: bool = False

    def __post_init__(self) -> None:
        self.owner = daemon_owner(self.cfg)
        self.state = DaemonState(cfg=self.cfg, targets={t.name: t for t in targets_of(self.cfg, sandbox=self.sandbox)},
                                 token=read_token(self.cfg), owner=self.owner)
        self.metrics, self.notifier = self.state.metrics, self.state.notifier
        self.worker = Worker(self.state)
        self.watch = DriftWatch(self.state, self.worker)
        self.worker.after_run = self.watch.after_run
        self.queries = Queries(self.state, self.worker)  # the API's backend
        self._reload_pending = False  # a SIGHUP before the scheduler ran: reloaded once it does
        for name in self.state.targets:
            self.metrics.target(name)

    @property
    def targets(self) -> dict[str, Target]:
        return self.state.targets

    # -- schedule ---------------------------------------------------------------------------------------------
    def _schedule(self) -> None:
        sch, daemon = self.state.scheduler, self.cfg.daemon
        for job in sch.get_jobs():
            job.remove()
        common = dict(max_instances=1, coalesce=True, misfire_grace_time=300, replace_existing=True)
        drift_s = daemon.drift_check_every.seconds
        reval_s = daemon.revalidate_every.seconds
        for name in self.targets:
            if daemon.schedule is not None:
                sch.add_job(self.worker.enqueue, daemon.schedule.trigger, id=f"session:{name}",
                            args=[name, "session"], kwargs={"reason": f"schedule {daemon.schedule}"}, **common)
            sch.add_job(self.watch.check, IntervalTrigger(seconds=drift_s), id=f"drift:{name}", args=[name],
                        next_run_time=datetime.now(UTC), **common)
            # Checked hourly (or as often as the interval is shorter); due is counted from the store.
            sch.add_job(self.worker.revalidate, IntervalTrigger(seconds=min(reval_s, 3600.0)),
                        id=f"revalidate:{name}", args=[name], **common)

    # -- reload ---------------------------------------------------------------------------------------------
    def _hup(self) -> None:
        if self.state.scheduler is None or not self.state.scheduler.running:
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
                self.watch.baseline_path(t).unlink(missing_ok=True)
                self.metrics.set_recommendations(name, ())
                self.metrics.set_in_force(name, {})
                self.state.on_server.pop(name, None)
            else:
                self.metrics.target(name)
        for name in set(self.targets) - set(targets):
            self.metrics.forget_target(name)
            self.state.on_server.pop(name, None)
        # (The store cannot change here, so the worker's store handle stays valid.)
        self.cfg = self.state.cfg = cfg
        self.state.targets, self.state.token = targets, token
        self._schedule()
        self.metrics.reload_ok.set(1)
        log.info("daemon.reloaded", targets=list(targets))
        self.state.wake.set()
        self.notifier.ready(self.state.status())

    # -- life -------------------------------------------------------------------------------------------------
    def stop(self, signum: int) -> None:
        if not self.state.stopping.is_set():
            log.info("daemon.stop", signal=signal.Signals(signum).name)
            self.notifier.stopping(f"stopping ({signal.Signals(signum).name})")
        self.state.stopping.set()
        self.state.wake.set()
        self.worker.stop_current(f"the daemon was stopped by {signal.Signals(signum).name}")

    async def run(self) -> int:
        sdir = state_dir(self.cfg)
        code = 0
        with DaemonLock(sdir):
            # Before anything else: whatever a killed session left is put back.
            journal = Journal(sdir, writer=SysfsWriter(self.cfg.readahead.helper_command))
            restored = journal.recover()
            for r in restored:
                log.warning("daemon.restored", detail=r.sentence())
            self.metrics.restore_ok.set(int(all(r.ok for r in restored)))
            async with contextlib.AsyncExitStack() as stack:
                stack.push_async_callback(self.worker.close)
                await self.worker.recover_interrupted()
                for t in self.targets.values():
                    if t.sandbox:  # a new sandbox each start: the last one's fingerprint is no baseline for it
                        self.watch.baseline_path(t).unlink(missing_ok=True)
                code = await self._serve(stack)
            for r in journal.recover():  # a belt to the runner's braces
                log.warning("daemon.restored", detail=r.sentence())
        log.info("daemon.stopped", exit_code=code)
        return code

    async def _serve(self, stack: contextlib.AsyncExitStack) -> int:
        """Signals, the sandboxes, the API, the scheduler and the worker, until a stop; the exit code."""
        st = self.state
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop, sig)
        # Until the scheduler runs, a SIGHUP is remembered and acted on then (its default would end the process).
        loop.add_signal_handler(signal.SIGHUP, self._hup)
        for t in self.targets.values():
            if t.sandbox:
                t.servers = await stack.enter_async_context(self._sandbox(t))
                t.label = label(t)
        host, port = listen_address(self.cfg.daemon.listen)
        runner = make_runner(self.queries)
        await runner.setup()
        stack.push_async_callback(runner.cleanup)
        try:
            await web.TCPSite(runner, host, port, reuse_address=True).start()
        except OSError as exc:
            raise DaemonError(f"cannot listen on {self.cfg.daemon.listen}: {exc.strerror or exc}",
                              hint="another process may hold the port; change [daemon] listen") from None
        st.bound = (host, port)
        st.scheduler = AsyncIOScheduler(timezone=local_timezone())
        self._schedule()
        st.scheduler.start()
        stack.callback(st.scheduler.shutdown, wait=False)
        if self._reload_pending:
            self.reload()
        for t in self.targets.values():
            await self.worker.refresh(t)
        log.info("daemon.ready", listen=f"{host}:{port}", targets=list(self.targets), pid=os.getpid())
        warning = schedule_warning(self.cfg)
        if warning:
            log.warning("daemon.schedule_outside_windows", detail=warning)
        self.notifier.ready(st.status())
        watchdog = asyncio.create_task(self._watchdog())
        worker = asyncio.create_task(self.worker.loop())
        stopped = asyncio.create_task(st.stopping.wait())
        code = 0
        done, _ = await asyncio.wait({worker, stopped}, return_when=asyncio.FIRST_COMPLETED)
        # The worker ends only when asked to: anything else is a failure systemd should see. Asked to means the
        # stop flag is set — a SIGTERM that lands as a run ends lets the worker's loop see the flag and return in
        # the same turn as the stop task, and that is a clean stop (a clean clone's CI saw exit 1 there).
        if worker in done and not (st.stopping.is_set() and worker.exception() is None):
            log.error("daemon.worker_died", error=repr(worker.exception()))
            code = 1
        # Stop: the current run ends at once (its journal restored by the runner), then everything else.
        self.worker.stop_current("the daemon is stopping")
        try:
            await asyncio.wait_for(asyncio.shield(worker), timeout=STOP_WITHIN_S - 5)
        except (TimeoutError, asyncio.CancelledError, Exception):
            worker.cancel()
        watchdog.cancel()
        return code

    @contextlib.asynccontextmanager
    async def _sandbox(self, target: Target) -> AsyncIterator[Any]:
        self.state.say("creating the sandbox")
        quiet = _Quiet()  # (tuner.core.loops's NullProgress would import the optimiser stack at start)
        async with servers(target.cfg, use_sandbox=True, progress=quiet, writable=True) as where:
            yield where

    async def _watchdog(self) -> None:
        interval = self.notifier.watchdog_interval_s
        if not interval:
            return
        while True:
            self.notifier.watchdog()
            await asyncio.sleep(interval)


class _Quiet:
    def phase(self, name: str, total: int | None) -> None:
        pass

    def advance(self, text: str) -> None:
        pass
