"""Read what the server measured from ``EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)``.

I/O timing keys differ by version: "I/O Read Time" up to 16, "Shared I/O Read Time" from 17, when EXPLAIN
began to time local blocks apart from shared ones (PostgreSQL 17 release notes: "Add local I/O block read/write
timing statistics to EXPLAIN's BUFFERS output"). Block counters on a node include its children's, so the heap's own
blocks of a Bitmap Heap Scan are its counters minus those of its Bitmap Index Scan children.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
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
    )
