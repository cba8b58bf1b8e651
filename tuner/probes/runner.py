"""Run one probe: apply knobs that live outside the session (readahead, through its journaled actuator), make
the cache cold, open a fresh connection, apply the other knob values with SET, run the workload under
EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON), and judge the plan and the cache evidence.

Session knobs use SET only: nothing persistent changes on the target through them.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Literal

import asyncpg

from tuner.errors import RefusedError, TargetError
from tuner.log import get_logger
from tuner.model import CacheEvidence, Trial
from tuner.probes import explain
from tuner.probes.cache import CacheControl
from tuner.probes.workload import ProbeQuery
from tuner.target.connection import connect

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
    ) -> None:
        self.dsn = dsn
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
        config: dict[str, int],
        *,
        phase: Literal["search", "confirm"] = "search",
        arm: Literal["baseline", "candidate"] | None = None,
    ) -> Trial:
        started = datetime.now(UTC)
        t0 = time.monotonic()

        metrics: dict[str, float] = {}

        def trial(status: Literal["ok", "failed", "rejected"], value: float | None, ev: CacheEvidence | None, reason: str | None) -> Trial:
            t = Trial(
                config=dict(config), value=value, status=status, phase=phase, arm=arm, cache=ev, reason=reason,
                started_at=started, duration_s=round(time.monotonic() - t0, 3), metrics=dict(metrics),
            )
            log.info(
                "probe", phase=phase, arm=arm, config=config, status=status,
                execution_time_ms=None if value is None else round(value, 1),
                heap_read=ev.heap_read if ev else None, heap_hit=ev.heap_hit if ev else None,
                io_read_time_ms=None if ev is None or ev.io_read_time_ms is None else round(ev.io_read_time_ms, 1),
                reason=reason, duration_s=t.duration_s, **{k: round(v, 1) for k, v in metrics.items()},
            )
            return t

        try:
            if self.precheck is not None:
                await self.precheck()
            for name, actuator in self.actuators.items():
                if name in config:
                    actuator(int(config[name]))  # synchronous: a cancelled probe cannot write after a restore
            await self.cache.make_cold()
            conn = await self._connect()
        except RefusedError:
            raise  # the server is no longer what the interlock cleared: the session stops
        except Exception as exc:  # noqa: BLE001 - every other failure becomes a failed trial, not a crash
            return trial("failed", None, None, f"could not prepare the probe: {exc}")
        total_ms = 0.0
        sums = {"shared_read": 0, "shared_hit": 0, "heap_read": 0, "heap_hit": 0}
        io_ms: float | None = None
        try:
            settings = dict(_BASE_SETTINGS)
            settings["statement_timeout"] = f"{int(self.statement_timeout_s * 1000)}"
            for name, value in config.items():
                if name not in self.actuators:
                    settings[name] = str(int(value))
            for name, text in settings.items():
                await conn.execute(f"SET {name} = '{text}'")
            try:
                await conn.execute("SET track_io_timing = on")
            except asyncpg.InsufficientPrivilegeError:
                pass  # times are still measured; only the I/O share is missing
            # The workload runs in a read-only transaction: a custom query cannot write, even on a clone.
            readonly = conn.transaction(readonly=True)
            await readonly.start()
            for q in self.queries:
                if q.plan is not None:
                    for name, text in _PLAN_SETTINGS[q.plan].items():
                        await conn.execute(f"SET {name} = '{text}'")
                else:
                    for name in _PLAN_SETTINGS["bitmap"]:
                        await conn.execute(f"RESET {name}")
                raw = await conn.fetchval(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {q.sql}")
                res = explain.parse(json.loads(raw) if isinstance(raw, str) else raw)
                need = q.plan or ("bitmap" if self.require_bitmap else None)
                if need is not None and _PLAN_NODE[need] not in res.node_types:
                    ev = _evidence(sums, io_ms, self.cache.os_method)
                    return trial("rejected", None, ev, f"{q.name} did not run as a {_PLAN_NODE[need].lower()}")
                total_ms += q.weight * res.execution_time_ms
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
        except asyncpg.QueryCanceledError:
            return trial("failed", None, None, f"statement timeout after {self.statement_timeout_s:g} s")
        except (asyncpg.PostgresError, OSError, asyncpg.InterfaceError) as exc:
            return trial("failed", None, None, f"{type(exc).__name__}: {exc}")
        finally:
            try:
                await asyncio.wait_for(conn.close(), timeout=5)
            except Exception:  # noqa: BLE001
                conn.terminate()
        return trial("ok", total_ms, _evidence(sums, io_ms, self.cache.os_method), None)


def _evidence(sums: dict[str, int], io_ms: float | None, method: str) -> CacheEvidence:
    return CacheEvidence(io_read_time_ms=io_ms, method=method, **sums)
