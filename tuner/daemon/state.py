"""What the daemon's parts share: the targets it tunes, the configuration in force (a reload swaps both), its
metrics and systemd notifier, and what it is doing now. The worker, the API's queries and the drift watch each
hold this one object, so a reload is seen by all of them at once."""

from __future__ import annotations

import asyncio
import hashlib
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tuner.settings.config import Config, state_dir
from tuner.daemon.metrics import Metrics
from tuner.daemon.systemd import Notifier
from tuner.errors import ConfigError
from tuner.store import target_id
from tuner import redact


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


def shown(dsn: str | None) -> str:
    return " ".join(redact.dsn(dsn).split()) if dsn else "PG* environment"


def label(target: Target) -> str:
    if target.sandbox:
        return f"sandbox of tuner daemon ({target.name})"
    return shown(target.dsn)


def store_id(sysid: str | None, fp: Mapping[str, Any], target: Target) -> str:
    return target_id(sysid, fp.get("data_directory"), fp.get("label") or label(target))


def daemon_owner(cfg: Config) -> str:
    """Which daemon a queued run belongs to: its host and state directory (daemons may share a store)."""
    return hashlib.sha256(f"{socket.gethostname()}|{state_dir(cfg)}".encode()).hexdigest()[:16]


@dataclass
class Current:
    """The run the worker is doing."""

    run: dict[str, Any]
    target: str
    phase: str = "starting"
    step: str = ""
    probes: int = 0
    task: asyncio.Task[Any] | None = None
    stop_reason: str | None = None


@dataclass
class DaemonState:
    cfg: Config
    targets: dict[str, Target]
    token: str | None
    owner: str
    metrics: Metrics = field(default_factory=Metrics)
    notifier: Notifier = field(default_factory=Notifier)
    wake: asyncio.Event = field(default_factory=asyncio.Event)  # the worker looks at its queue now
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    current: Current | None = None
    scheduler: Any = None  # apscheduler's AsyncIOScheduler, once it runs
    bound: tuple[str, int] | None = None  # the address the API is bound to (a reload cannot move it)
    store_problem: str | None = None  # why the store did not answer the worker last time (for /readyz)
    journal_left: str | None = None  # what the journal still holds after a run (for /readyz)
    # Per target: what the server runs with now ((knob, object) -> value) and when the drift check read it.
    on_server: dict[str, tuple[str, dict[tuple[str, str | None], Any]]] = field(default_factory=dict)

    def status(self) -> str:
        """What the daemon is doing, for systemd's STATUS= and /readyz."""
        if self.current is not None:
            c = self.current
            return f"{c.run['kind']} {c.run['id']} on {c.target}: {c.phase}"
        jobs = [j for j in (self.scheduler.get_jobs() if self.scheduler else []) if j.id.startswith("session:")]
        nxt = min((j.next_run_time for j in jobs if j.next_run_time), default=None)
        return f"idle; next scheduled session {nxt:%Y-%m-%d %H:%M %Z}" if nxt else "idle; no scheduled session"

    def say(self, status: str) -> None:
        self.notifier.status(status)
