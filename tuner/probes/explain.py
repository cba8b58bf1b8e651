"""Read what the server measured from ``EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)``.

I/O timing keys differ by version: "I/O Read Time" up to 16, "Shared I/O Read Time" from 17, when EXPLAIN
began to time local blocks apart from shared ones (PostgreSQL 17 release notes: "Add local I/O block read/write
timing statistics to EXPLAIN's BUFFERS output"). Block counters on a node include its children's, so the heap's own
blocks of a Bitmap Heap Scan are its counters minus those of its Bitmap Index Scan children.

``EXPLAIN (IO)`` (19: commits 681daed9 for bitmap heap scans, 3b1117d6 for sequential scans) reports each scan's read
stream: how far its look-ahead reached ("Average/Max Prefetch Distance"), how many I/Os it issued and waited for,
and their average size in blocks (what read combining made of them) — the why behind a trial's time.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

_READ_TIME_KEYS = ("Shared I/O Read Time", "I/O Read Time")


@dataclass(frozen=True)
class ExplainResult:
    execution_time_ms: float
    shared_read: int  # whole plan
    shared_hit: int
    io_read_time_ms: float | None  # None when track_io_timing was off
    heap_read: int  # the Bitmap Heap Scan nodes' own blocks
    heap_hit: int
    node_types: tuple[str, ...]
    # 19+ with EXPLAIN (IO): the scans' read streams (io_count, io_waits, prefetch_distance_max/_avg,
    # io_size_avg_blocks), empty before
    read_stream: dict[str, float] = field(default_factory=dict)

    @property
    def has_bitmap_heap_scan(self) -> bool:
        return "Bitmap Heap Scan" in self.node_types

    @property
    def heap_read_fraction(self) -> float:
        total = self.heap_read + self.heap_hit
        return self.heap_read / total if total else 0.0


def _nodes(plan: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    yield plan
    for child in plan.get("Plans", ()):
        yield from _nodes(child)


def _io_time(node: Mapping[str, Any]) -> float | None:
    for key in _READ_TIME_KEYS:
        if key in node:
            return float(node[key])
    return None


def parse(doc: Any) -> ExplainResult:
    """Parse the JSON document EXPLAIN returned (a list with one object, or that object)."""
    if isinstance(doc, list):
        doc = doc[0]
    plan = doc["Plan"]
    heap_read = heap_hit = 0
    for node in _nodes(plan):
        if node.get("Node Type") == "Bitmap Heap Scan":
            # Children's counters are already inclusive, so subtract only the direct children.
            children = list(node.get("Plans", ()))
            heap_read += int(node.get("Shared Read Blocks", 0)) - sum(int(c.get("Shared Read Blocks", 0)) for c in children)
            heap_hit += int(node.get("Shared Hit Blocks", 0)) - sum(int(c.get("Shared Hit Blocks", 0)) for c in children)
    return ExplainResult(
        execution_time_ms=float(doc["Execution Time"]),
        shared_read=int(plan.get("Shared Read Blocks", 0)),
        shared_hit=int(plan.get("Shared Hit Blocks", 0)),
        io_read_time_ms=_io_time(plan),
        heap_read=max(0, heap_read),
        heap_hit=max(0, heap_hit),
        node_types=tuple(str(n.get("Node Type")) for n in _nodes(plan)),
        read_stream=_read_stream(plan),
    )


def _read_stream(plan: Mapping[str, Any]) -> dict[str, float]:
    """EXPLAIN (IO)'s figures over the plan's scan nodes: counts summed, the maximum distance the largest, the
    averages weighted by each node's I/O count."""
    scans = [n for n in _nodes(plan) if "I/O Count" in n]
    count = sum(float(n["I/O Count"]) for n in scans)
    if not scans:
        return {}
    out = {"io_count": count, "io_waits": sum(float(n.get("I/O Waits", 0)) for n in scans),
           "prefetch_distance_max": max(float(n.get("Max Prefetch Distance", 0)) for n in scans)}
    for key, name in (("Average Prefetch Distance", "prefetch_distance_avg"), ("Average I/O Size", "io_size_avg_blocks")):
        if count > 0:
            out[name] = sum(float(n.get(key, 0)) * float(n["I/O Count"]) for n in scans) / count
    return out


class ReadStreams:
    """EXPLAIN (IO)'s figures over a probe's queries, per scan kind (``bitmap_io_count``, ``seq_prefetch_distance_max``
    …), combined as :func:`_read_stream` combines a plan's nodes."""

    def __init__(self) -> None:
        self._by: dict[str, list[dict[str, float]]] = {}

    def add(self, kind: str, read_stream: Mapping[str, float]) -> None:
        if read_stream:
            self._by.setdefault(kind, []).append(dict(read_stream))

    def metrics(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for kind, parts in self._by.items():
            count = sum(p["io_count"] for p in parts)
            out[f"{kind}_io_count"] = count
            out[f"{kind}_io_waits"] = sum(p["io_waits"] for p in parts)
            out[f"{kind}_prefetch_distance_max"] = max(p["prefetch_distance_max"] for p in parts)
            for name in ("prefetch_distance_avg", "io_size_avg_blocks"):
                if count > 0:
                    out[f"{kind}_{name}"] = round(sum(p.get(name, 0.0) * p["io_count"] for p in parts) / count, 3)
        return out
