"""Run one probe: apply knobs that live outside the session (readahead, through its journaled actuator; server-wide
settings such as ``io_workers`` and ``io_method``, through journaled ALTER SYSTEM), make the cache cold, open a
fresh connection, apply the other knob values with SET, run the workload under EXPLAIN (ANALYZE, BUFFERS, FORMAT
JSON), and judge the plan and the cache evidence.

Session knobs use SET only: nothing persistent changes on the target through them.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import asyncpg

from tuner.errors import RefusedError, TargetError, TunerError
from tuner.log import get_logger
from tuner.report.model import CacheEvidence, Trial
from tuner.probes import explain
from tuner.probes.cache import CacheControl
from tuner.probes.diskstat import DiskReader, DiskWindow
from tuner.probes.statio import StatIo
from tuner.probes.workload import ProbeQuery, own_settings
from tuner.target.connection import connect

if TYPE_CHECKING:
    from tuner.actuate import Journal, Restored

log = get_logger("tuner.probe")

# For clean numbers: no parallel workers (their I/O times are summed), no JIT compile time in the result.
_BASE_SETTINGS = {"max_parallel_workers_per_gather": "0", "jit": "off"}
# Planner switches per required plan: everything but the wanted scan is off. Queries without a plan RESET them.
_PLAN_SETTINGS = {
    "bitmap": {"enable_seqscan": "off", "enable_indexscan": "off", "enable_indexonlyscan": "off", "enable_bitmapscan": "on"},
    "seq": {"enable_seqscan": "on", "enable_indexscan": "off", "enable_indexonlyscan": "off", "enable_bitmapscan": "off"},
}
_PLAN_NODE = {"bitmap": "Bitmap Heap Scan", "seq": "Seq Scan"}
Actuator = Callable[[int], None]
Value = int | str
AUTO_CONF = "postgresql.auto.conf"


class SystemKnobs:
    """Server-wide settings a probe changes with ALTER SYSTEM — journaled before each first change — and a reload
    (``io_workers``), or a restart as well (``io_method``, postmaster context). Only for a server whose ALTER SYSTEM
    lines the journal may write back: tuner's own sandbox, or a writable clone marked staging
    (:mod:`tuner.actuate.alter_system`). :meth:`put_back` restores them at the end of the family; the session's
    journal does in any case.

    ``connector`` and ``restart`` are the endpoint's (checked by the interlock); ``data_directory`` is the server's
    on this host: if the server does not start with what tuner wrote (``io_method = io_uring`` on a kernel that
    refuses it), ``postgresql.auto.conf`` is put back byte for byte while it is down.
    """

    def __init__(
        self, *, journal: Journal, contexts: Mapping[str, str], connector: Callable[[], Awaitable[asyncpg.Connection]],
        restart: Callable[[], Awaitable[None]] | None, dsn: str | None, identity: Mapping[str, Any],
        data_directory: Path, settle_s: float = 10.0, came_back_s: float = 30.0,
    ) -> None:
        self.journal = journal
        self.contexts = dict(contexts)
        self.connector = connector
        self._restart = restart
        self.dsn = dsn
        self.identity = dict(identity)
        self.auto_conf = data_directory / AUTO_CONF
        self.settle_s = settle_s
        self.came_back_s = came_back_s
        self.applied: dict[str, str] = {}  # what tuner last wrote, per setting (none: postgresql.auto.conf as it was)
        self._auto_conf_before: bytes | None = None
        # (setting, value) the server did not start with: the sentence that said so
        self.refused: dict[tuple[str, str], str] = {}

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self.contexts)

    def needs_restart(self, names: Iterable[str]) -> bool:
        return any(self.contexts.get(n) == "postmaster" for n in names)

    async def apply(self, wanted: Mapping[str, Value]) -> list[str]:
        """Write what differs from what tuner last wrote (journaled first) and reload; wait until new backends see
        the reload-level ones. Returns the names that changed."""
        changed = {k: str(v) for k, v in wanted.items() if self.applied.get(k) != str(v)}
        if not changed:
            return []
        for k, v in changed.items():
            if (k, v) in self.refused:
                raise TunerError(self.refused[k, v])
        if self._auto_conf_before is None and self.needs_restart(changed):
            try:  # kept for a server that does not start with what tuner writes (see restart)
                self._auto_conf_before = self.auto_conf.read_bytes()
            except OSError as exc:
                raise TunerError(f"cannot read {self.auto_conf} ({exc.strerror}), which tuner would need to put back "
                                 "if the server did not start with the new setting") from None
        await self.journal.alter_system_and_reload(self.connector, changed, dsn=self.dsn, **self.identity)
        self.applied.update(changed)
        reloaded = {k: v for k, v in changed.items() if self.contexts.get(k) != "postmaster"}
        if reloaded:
            await self._settle(reloaded)
        return list(changed)

    async def _settle(self, wanted: Mapping[str, str]) -> None:
        """A reload is asynchronous: wait (``settle_s`` at most) until a new backend sees the new values."""
        deadline = time.monotonic() + self.settle_s
        while True:
            conn = await self.connector()
            try:
                differs = await self.differs(conn, wanted)
            finally:
                await conn.close()
            if differs is None or time.monotonic() > deadline:
                return
            await asyncio.sleep(0.1)

    async def differs(self, conn: asyncpg.Connection, wanted: Mapping[str, Value]) -> str | None:
        """None when every setting in ``wanted`` is in force for ``conn``, else the first that is not (a sentence)."""
        for name, value in wanted.items():
            now = await conn.fetchval("SELECT setting FROM pg_settings WHERE name = $1", name)
            if now != str(value):
                return f"{name} is {now} on the server, not {value}"
        return None

    async def restart(self) -> None:
        """Restart the server for a restart-level setting. If it does not come back, put ``postgresql.auto.conf``
        back as it was (the server is down: nothing else writes it), start it again with that, and raise
        :class:`TunerError` with what the server's log said; the values it did not start with are refused from then
        on (a later probe asking for them fails at once, with the same sentence, instead of another restart)."""
        if self._restart is None:
            raise TunerError("a restart-level setting needs a restart, and this session may not restart the server")
        try:
            await self._restart()
            await self._came_back()
        except RefusedError:
            raise
        except Exception as exc:  # noqa: BLE001 - the start failed: the file goes back, the error says why
            written = dict(self.applied)
            why, put_back = self.start_failure(exc)
            if not put_back:
                raise TunerError(why, hint="start the server by hand; `tuner restore` finds its journal entries in "
                                 "place") from None
            try:
                await self._restart()
                await self._came_back()
            except RefusedError:
                raise
            except Exception as again:  # noqa: BLE001 - not even as it was: only a person can look
                raise TunerError(f"{why}, and it did not start again with that either ({again})",
                                 hint="start the server by hand; `tuner restore` finds its journal entries in "
                                 "place") from None
            sentence = f"{why}, and tuner started the server again with it"
            self.refused.update({(k, v): sentence for k, v in written.items() if self.needs_restart([k])})
            raise TunerError(sentence) from None

    async def _came_back(self) -> None:
        """Raise unless a postmaster runs in the data directory within ``came_back_s``: a restart command can
        succeed for a server that then stops at once (pg_ctl -w restart of Debian's 18 on a hot standby returned 0
        when the new postmaster exited on "could not setup io_uring queue"); an external command's server may take
        a moment to write its postmaster.pid."""
        deadline = time.monotonic() + self.came_back_s
        while not _postmaster_running(self.auto_conf.parent):
            if time.monotonic() > deadline:
                raise TunerError(f"no server runs in {self.auto_conf.parent} after the restart")
            await asyncio.sleep(0.2)

    def start_failure(self, exc: BaseException) -> tuple[str, bool]:
        """What went wrong with a restart after tuner wrote its settings, and whether the file went back: if the
        server is down, it goes back as it was before tuner's first restart-level change."""
        written = ", ".join(f"{k} = {v}" for k, v in self.applied.items())
        why = _last_fatal(self.auto_conf.parent / "server.log") or str(exc)
        if self._auto_conf_before is None or _postmaster_running(self.auto_conf.parent):
            return f"the restart with {written} failed ({why})", False
        self.auto_conf.write_bytes(self._auto_conf_before)  # in place: owner and mode stay the server's
        self.applied.clear()
        return f"the server did not start with {written} ({why}); postgresql.auto.conf is back as it was", True

    async def put_back(self) -> list[Restored]:
        """Every ALTER SYSTEM line of this session back as it was (reloaded; restarted when a restart-level one
        was changed). Sentences of what was done, as the journal gives them."""
        if not self.journal.changes():
            return []
        restart = any(self.contexts.get(c.get("name", "")) == "postmaster" for c in self.journal.changes()
                      if c.get("kind") == "alter_system")
        conn = await self.connector()
        try:
            restored = await self.journal.restore_system(conn)
            await conn.execute("SELECT pg_reload_conf()")
        finally:
            await conn.close()
        self.applied.clear()
        if restart and any(r.action == "restored" for r in restored) and self._restart is not None:
            await self._restart()
        return restored


def _postmaster_running(data_directory: Path) -> bool:
    """postmaster.pid names a live process (then the server owns postgresql.auto.conf: tuner leaves it alone)."""
    try:
        pid = int((data_directory / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return False
    return Path(f"/proc/{pid}").exists()


def _last_fatal(server_log: Path) -> str | None:
    """The last FATAL or PANIC line of the server's log (the sandbox's pg_ctl -l file), if there is one here."""
    try:
        with server_log.open("rb") as fh:
            fh.seek(max(0, server_log.stat().st_size - 16384))
            lines = fh.read().decode(errors="replace").splitlines()
    except OSError:
        return None
    fatal = [ln for ln in lines if "FATAL:" in ln or "PANIC:" in ln]
    return fatal[-1].strip()[:300] if fatal else None


class ColdProbe:
    """A callable ``await probe(config, phase=…, arm=…) -> Trial``.

    ``actuators`` apply the knobs that are not session settings (``read_ahead_kb``) before the cache is emptied
    and the connection opened — a file's readahead is fixed when it is opened, so the order matters.
    """

    def __init__(
        self,
        *,
        dsn: str | None,
        queries: Sequence[ProbeQuery],
        cache: CacheControl,
        statement_timeout_s: float,
        min_cold_read_fraction: float,
        require_bitmap: bool,
        connect_timeout_s: float = 10.0,
        actuators: Mapping[str, Actuator] | None = None,
        block_size: int = 8192,
        connector: Callable[[], Awaitable[asyncpg.Connection]] | None = None,
        precheck: Callable[[], Awaitable[None]] | None = None,
        system: SystemKnobs | None = None,
        cold_per_query: bool = False,
        server_version_num: int = 0,
        disk: DiskReader | None = None,
    ) -> None:
        self.dsn = dsn
        self.disk = disk  # the data directory's device: its counters around the scans (tuner.probes.diskstat)
        self.connector = connector  # a checked connection (the session's guard); else connect(dsn)
        # Checks the server before the probe changes anything on its host (readahead, the page cache): a standby
        # promoted since the last probe stops the session before its host is touched.
        self.precheck = precheck
        self.queries = list(queries)
        self.cache = cache
        self.statement_timeout_s = statement_timeout_s
        self.min_cold_read_fraction = min_cold_read_fraction
        self.require_bitmap = require_bitmap
        self.connect_timeout_s = connect_timeout_s
        self.actuators = dict(actuators or {})
        self.block_size = block_size
        self.system = system  # server-wide knobs (ALTER SYSTEM): applied before the cache is emptied
        # Each query in a cache emptied for it, in a session of its own (a sequential scan after a bitmap scan of
        # the same table would find its blocks cached); else one cold cache and one session for the workload.
        self.cold_per_query = cold_per_query
        # Evidence beside the time: pg_stat_io's reads, hits and bytes per read (16+, 18+), EXPLAIN (IO)'s read
        # streams (19+: the option is an error before).
        self.server_version_num = server_version_num
        self._explain = "ANALYZE, BUFFERS, IO, FORMAT JSON" if server_version_num >= 190000 else \
            "ANALYZE, BUFFERS, FORMAT JSON"

    async def _connect(self) -> asyncpg.Connection:
        # After a restart by an external command the server may take a moment to accept connections.
        deadline = time.monotonic() + 60
        while True:
            try:
                if self.connector is not None:
                    return await self.connector()
                return await connect(self.dsn, timeout_s=self.connect_timeout_s)
            except TargetError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.5)

    async def __call__(
        self,
        config: Mapping[str, Value],
        *,
        phase: Literal["search", "confirm"] = "search",
        arm: Literal["baseline", "candidate"] | None = None,
    ) -> Trial:
        started = datetime.now(UTC)
        t0 = time.monotonic()

        metrics: dict[str, float] = {}
        query_ms: dict[str, float] = {}  # each query's own execution time: what each one gains (tuner.core.per_query)

        def trial(status: Literal["ok", "failed", "rejected"], value: float | None, ev: CacheEvidence | None, reason: str | None) -> Trial:
            t = Trial(
                config=dict(config), value=value, status=status, phase=phase, arm=arm, cache=ev, reason=reason,
                started_at=started, duration_s=round(time.monotonic() - t0, 3), metrics=dict(metrics),
                query_ms=dict(query_ms) if status == "ok" else {},
            )
            log.info(
                "probe", phase=phase, arm=arm, config=config, status=status,
                execution_time_ms=None if value is None else round(value, 1),
                heap_read=ev.heap_read if ev else None, heap_hit=ev.heap_hit if ev else None,
                io_read_time_ms=None if ev is None or ev.io_read_time_ms is None else round(ev.io_read_time_ms, 1),
                reason=reason, duration_s=t.duration_s, **{k: round(v, 1) for k, v in metrics.items()},
            )
            return t

        system = {k: v for k, v in config.items() if self.system is not None and k in self.system.names}
        try:
            if self.precheck is not None:
                await self.precheck()
            for name, actuator in self.actuators.items():
                if name in config:
                    actuator(int(config[name]))  # synchronous: a cancelled probe cannot write after a restore
            if self.system is not None and system:
                changed = await self.system.apply(system)
                if self.system.needs_restart(changed):
                    await self.system.restart()
            await self.cache.make_cold()
            conn = await self._connect()
        except RefusedError:
            raise  # the server is no longer what the interlock cleared: the session stops
        except Exception as exc:  # noqa: BLE001 - every other failure becomes a failed trial, not a crash
            return trial("failed", None, None, f"could not prepare the probe: {exc}")
        if self.system is not None and system:
            try:
                differs = await self.system.differs(conn, system)
            except (asyncpg.PostgresError, OSError, asyncpg.InterfaceError) as exc:
                differs = f"{type(exc).__name__}: {exc}"
            if differs is not None:
                conn.terminate()
                return trial("failed", None, None, f"the probe's server-wide settings are not in force: {differs}")
        total_ms = 0.0
        stat_io, streams, disk = StatIo(self.server_version_num), explain.ReadStreams(), DiskWindow(self.disk)
        sums = {"shared_read": 0, "shared_hit": 0, "heap_read": 0, "heap_hit": 0}
        io_ms: float | None = None
        settings = dict(_BASE_SETTINGS)
        settings["statement_timeout"] = f"{int(self.statement_timeout_s * 1000)}"
        for name, value in config.items():
            if name not in self.actuators and name not in system:
                settings[name] = str(int(value))
        try:
            for i, q in enumerate(self.queries):
                if i == 0 or self.cold_per_query:
                    if i > 0:  # the scans before this one warmed the cache for it: cold again, a new session
                        disk.stop()
                        await stat_io.stop(conn)
                        await _close(conn)
                        try:
                            await self.cache.make_cold()
                            conn = await self._connect()
                        except RefusedError:
                            raise
                        except Exception as exc:  # noqa: BLE001 - a failed trial, not a crash
                            return trial("failed", None, None, f"could not prepare {q.name}: {exc}")
                    await stat_io.start(conn)
                    await _begin(conn, settings)
                    disk.start()
                if q.plan is not None:
                    for name, text in _PLAN_SETTINGS[q.plan].items():
                        await conn.execute(f"SET {name} = '{text}'")
                else:
                    for name in _PLAN_SETTINGS["bitmap"]:
                        await conn.execute(f"RESET {name}")
                async with own_settings(conn, q):  # your own query's SETs, for it alone
                    raw = await conn.fetchval(f"EXPLAIN ({self._explain}) {q.sql}")
                res = explain.parse(json.loads(raw) if isinstance(raw, str) else raw)
                streams.add(q.plan or "scan", res.read_stream)
                need = q.plan or ("bitmap" if self.require_bitmap else None)
                if need is not None and _PLAN_NODE[need] not in res.node_types:
                    ev = _evidence(sums, io_ms, self.cache.os_method)
                    return trial("rejected", None, ev, f"{q.name} did not run as a {_PLAN_NODE[need].lower()}")
                total_ms += q.weight * res.execution_time_ms
                query_ms[q.name] = res.execution_time_ms
                if q.plan is not None:
                    metrics[f"{q.plan}_scan_ms"] = metrics.get(f"{q.plan}_scan_ms", 0.0) + res.execution_time_ms
                if q.plan == "seq" and res.execution_time_ms > 0:
                    metrics["seq_scan_mb_s"] = res.shared_read * self.block_size / 1e6 / (res.execution_time_ms / 1000)
                sums["shared_read"] += res.shared_read
                sums["shared_hit"] += res.shared_hit
                heap_read, heap_hit = (res.heap_read, res.heap_hit) if res.has_bitmap_heap_scan else (res.shared_read, res.shared_hit)
                sums["heap_read"] += heap_read
                sums["heap_hit"] += heap_hit
                if res.io_read_time_ms is not None:
                    io_ms = (io_ms or 0.0) + res.io_read_time_ms
                total = heap_read + heap_hit
                frac = heap_read / total if total else 0.0
                if frac < self.min_cold_read_fraction:
                    ev = _evidence(sums, io_ms, self.cache.os_method)
                    return trial(
                        "rejected", None, ev,
                        f"{q.name}: only {frac:.0%} of heap blocks came from disk (cache not cold)",
                    )
            disk.stop()
            await stat_io.stop(conn)
            metrics.update({**stat_io.metrics(), **streams.metrics(), **disk.metrics()})
        except asyncpg.QueryCanceledError:
            return trial("failed", None, None, f"statement timeout after {self.statement_timeout_s:g} s")
        except (asyncpg.PostgresError, OSError, asyncpg.InterfaceError) as exc:
            return trial("failed", None, None, f"{type(exc).__name__}: {exc}")
        finally:
            await _close(conn)
        return trial("ok", total_ms, _evidence(sums, io_ms, self.cache.os_method), None)


async def _begin(conn: asyncpg.Connection, settings: Mapping[str, str]) -> None:
    """The probe's session settings, then a read-only transaction: a custom query cannot write, even on a clone."""
    for name, text in settings.items():
        await conn.execute(f"SET {name} = '{text}'")
    try:
        await conn.execute("SET track_io_timing = on")
    except asyncpg.InsufficientPrivilegeError:
        pass  # times are still measured; only the I/O share is missing
    await conn.transaction(readonly=True).start()


async def _close(conn: asyncpg.Connection) -> None:
    if conn.is_closed():
        return
    try:
        await asyncio.wait_for(conn.close(), timeout=5)
    except Exception:  # noqa: BLE001
        conn.terminate()


def _evidence(sums: dict[str, int], io_ms: float | None, method: str) -> CacheEvidence:
    return CacheEvidence(io_read_time_ms=io_ms, method=method, **sums)
