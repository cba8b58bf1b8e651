"""The daemon as the HTTP API sees it (:class:`tuner.daemon.api.Backend`): what the API asks is answered here
from the store and the daemon's state, and a session it requests is handed to the worker's queue."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from tuner import emit
from tuner.settings.config import is_loopback, listen_address
from tuner.daemon import page, session_request
from tuner.daemon.state import DaemonState, label
from tuner.daemon.worker import Worker
from tuner.emit.json import to_dict
from tuner.errors import ConfigError, DaemonError
from tuner.knobs import catalog
from tuner.store import StoreError
from tuner.store import target_history

PAGE_SESSIONS = 30  # the sessions per target the page draws its history from


class Queries:
    def __init__(self, state: DaemonState, worker: Worker) -> None:
        self.state, self.worker = state, worker

    def token(self) -> str | None:
        return self.state.token

    def token_everywhere(self) -> bool:
        # From the address actually bound, not from a reloaded file (a reload cannot move the socket).
        host = (self.state.bound or listen_address(self.state.cfg.daemon.listen))[0]
        return not is_loopback(host)

    def loopback_hosts(self) -> frozenset[str] | None:
        """Host headers accepted on a loopback socket (against DNS rebinding); None: any (off loopback, where every
        endpoint but /healthz needs the token anyway)."""
        host, port = self.state.bound or listen_address(self.state.cfg.daemon.listen)
        if not is_loopback(host):
            return None
        names = {"localhost", "127.0.0.1", "[::1]", host if ":" not in host else f"[{host}]"}
        return frozenset({*names, *(f"{n}:{port}" for n in names)})

    def ready(self) -> tuple[bool, str]:
        st = self.state
        if st.scheduler is None or not st.scheduler.running:
            return False, "the scheduler is not running"
        if st.store_problem:
            return False, st.store_problem
        if st.journal_left:
            return False, f"{st.journal_left}; run 'tuner restore'"
        return True, st.status()

    def metrics(self) -> tuple[bytes, str]:
        return self.state.metrics.render(), self.state.metrics.content_type

    def _no_target(self, target: str) -> DaemonError:
        return DaemonError(f"no target {target!r}", hint=f"targets: {', '.join(self.state.targets)}", status=404)

    async def recommendations(self, target: str | None) -> dict[str, Any]:
        if target is not None and target not in self.state.targets:
            raise self._no_target(target)
        out = []
        async with self.worker.store() as db:
            for t in self.state.targets.values():
                if target and t.name != target:
                    continue
                accepted = await db.accepted.find(t.store_id) if t.store_id else []
                recs: list[dict[str, Any]] = []
                lines: dict[str, Any] = {"per_query": [], "left_out": []}
                if accepted:  # as the JSON report has them: with apply_sql, rollback_sql and host commands
                    report = (await db.sessions.report(accepted[0][0])).model_copy(
                        update={"recommendations": [r for _, r in accepted]})
                    data = to_dict(report)
                    recs = [rec | {"session_id": sid}
                            for rec, (sid, _) in zip(data["recommendations"], accepted, strict=True)]
                    # What each query of the workload gains, and what the workload left out (#56).
                    lines = {"per_query": data["per_query"], "left_out": data["left_out"]}
                # What limited the reads in the newest stored session (tune or provision?), as its report says.
                latest = await db.sessions.newest(target=t.store_id, limit=1) if t.store_id else []
                newest = await db.sessions.report(latest[0].id) if latest else None
                out.append({"target": t.name, "target_id": t.store_id, "recommendations": recs, **lines,
                            "io_regime": [r.model_dump(mode="json") for r in newest.io_regime] if newest else [],
                            "device_profile": newest.device_profile if newest else None})
        return {"generated_at": datetime.now(UTC).isoformat(timespec="seconds"), "targets": out}

    async def rendered(self, target: str, fmt: str) -> dict[str, str]:
        """The accepted recommendations rendered by an emitter, with the newest session's header. With none in
        force (never any, or all withdrawn) the files say so and set nothing — a config-management pull then
        removes what an earlier pull put in place."""
        if fmt not in emit.FORMATS:
            raise DaemonError(f"unknown format {fmt!r}", hint=f"formats: {', '.join(emit.FORMATS)}")
        t = self.state.targets.get(target)
        if t is None:
            raise self._no_target(target)
        async with self.worker.store() as db:
            accepted = await db.accepted.find(t.store_id) if t.store_id else []
            latest = await db.sessions.newest(target=t.store_id, limit=1) if t.store_id else []
            if not latest:
                raise DaemonError(f"target {target} has no stored session yet", status=409,
                                  hint="GET /v1/sessions shows what ran; POST /v1/sessions runs a session now")
            report = await db.sessions.report(latest[0].id)
            history = await target_history(db, report) if fmt == "html" else None
        report = report.model_copy(update={"recommendations": [r for _, r in accepted]})
        return emit.render(report, fmt, history=history)

    async def page(self) -> str:
        """The page for people (``GET /``): :mod:`tuner.daemon.page`."""
        st = self.state
        views = []
        async with self.worker.store() as db:
            for t in st.targets.values():
                accepted = await db.accepted.find(t.store_id) if t.store_id else []
                sessions = await db.sessions.newest(target=t.store_id, limit=PAGE_SESSIONS) if t.store_id else []
                latest = await db.sessions.report(sessions[0].id) if sessions else None
                checked_at, values = st.on_server.get(t.name, (None, {}))
                running = st.status() if st.current is not None and st.current.target == t.name else None
                views.append(page.TargetPage(name=t.name, label=t.label or label(t), in_force=accepted,
                                             on_server=values, checked_at=checked_at, sessions=sessions,
                                             latest=latest, running=running, tuned=_tuned(t.cfg.tuner.families)))
        return page.render(views, status=st.status(), generated_at=datetime.now(UTC))

    async def session_html(self, session_id: str) -> str | None:
        """One stored session's HTML report, with its target's history; None when there is no such session."""
        if not _is_session_id(session_id):
            return None
        async with self.worker.store() as db:
            try:
                report = await db.sessions.report(session_id)
            except ConfigError:  # no such session
                return None
            history = await target_history(db, report)
        return emit.render(report, "html", history=history)["report.html"]

    async def sessions(self, limit: int) -> dict[str, Any]:
        async with self.worker.store() as db:
            runs = await db.runs.find(self.state.owner, limit=limit)
            stored = await db.sessions.newest(limit=limit)
        for run in runs:
            self._live(run)
        return {"runs": runs, "sessions": [_summary(s) for s in stored]}

    async def session(self, session_id: str) -> dict[str, Any] | None:
        if not _is_session_id(session_id):
            return None
        async with self.worker.store() as db:
            run = next(iter(r for r in await db.runs.find(self.state.owner, limit=1000) if r["id"] == session_id), None)
            try:
                report = (await db.sessions.report(session_id)).model_dump(mode="json")
            except (ConfigError, StoreError):
                report = None
        if run is None and report is None:
            return None
        if run is not None:
            self._live(run)
        return {"run": run, "report": report}

    async def drift(self, limit: int) -> dict[str, Any]:
        async with self.worker.store() as db:
            return {"events": await db.drift_events.recent(limit=limit)}

    async def request_session(self, body: dict[str, Any]) -> dict[str, Any]:
        req = session_request.parse(body, {n: t.cfg.tuner.families for n, t in self.state.targets.items()})
        run = await self.worker.enqueue(req.target, req.kind, reason="requested over the API",
                                        families=req.families, forced=req.forced)
        return {"id": run["id"], "status": "queued", "target": req.target, "kind": req.kind,
                "families": self._families(run), "in_window": not req.forced,
                "already_queued": bool(run.get("already_queued"))}

    def _families(self, run: dict[str, Any]) -> list[str]:
        """The families a run probes. The queue stores none for "all of the target's" (so that equal work is
        queued once); a reader is shown them, not an empty list. A re-validation probes what its pins name."""
        target = self.state.targets.get(run["target"])
        if run["families"] or run["kind"] == "revalidate" or target is None:
            return list(run["families"])
        return list(target.cfg.tuner.families)

    def _live(self, run: dict[str, Any]) -> None:
        run["families"] = self._families(run)
        cur = self.state.current
        if cur is not None and cur.run["id"] == run["id"]:
            run["progress"] = {"phase": cur.phase, "step": cur.step, "probes": cur.probes}


def _tuned(families: Sequence[str]) -> frozenset[str]:
    """The settings ``families`` tune: the drift check reads every catalogued one, the page lists only these."""
    known = catalog.load()
    return frozenset(k for k in known.reported_names() if known.family_of(k) in families)


def _is_session_id(text: str) -> bool:
    """Whether ``text`` can be a session id (hexadecimal, at most 32 digits) — before it goes near the store."""
    return bool(text) and len(text) <= 32 and all(c in "0123456789abcdef" for c in text)


def _summary(s: Any) -> dict[str, Any]:
    return {"id": s.id, "target_id": s.target_id, "target": s.target, "started_at": s.started_at,
            "duration_s": s.duration_s, "kind": s.kind, "server_version": s.server_version, "policy": s.policy,
            "probes": s.probes, "decisions": s.decisions}
