"""The concurrency family's section of the HTML report: the why behind its trials' times — what pg_stat_io (16+)
counted and what EXPLAIN (IO) (19+) said of each scan's read stream, per configuration measured.

A shorter time with more bytes per read says read combining did it; a larger prefetch distance with fewer I/O waits
says the look-ahead did; no change in either says the knob did not reach the reads."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from tuner.emit.svg import Figures, esc
from tuner.core.decide import Decision
from tuner.report.model import Report, Trial

# (metric, column heading), in the order shown; a column appears only where some trial carries it
COLUMNS = (
    ("stat_io_bytes_per_read", "bytes per read (pg_stat_io)"),
    ("stat_io_reads", "reads"),
    ("stat_io_hits", "hits"),
    ("bitmap_prefetch_distance_max", "bitmap scan: max prefetch distance"),
    ("bitmap_io_size_avg_blocks", "bitmap scan: blocks per I/O"),
    ("bitmap_io_waits", "bitmap scan: I/O waits"),
    ("seq_prefetch_distance_max", "seq scan: max prefetch distance"),
    ("seq_io_size_avg_blocks", "seq scan: blocks per I/O"),
    ("seq_io_waits", "seq scan: I/O waits"),
    ("io_workers_running", "I/O workers after the scans"),
)


@dataclass(frozen=True)
class IoRow:
    """One configuration's trials: their count, median time and the median of each evidence metric."""

    config: str
    trials: int
    median_ms: float
    medians: dict[str, float]


def io_rows(trials: Sequence[Trial], family: str = "concurrency") -> list[IoRow]:
    """Each configuration the family measured with I/O evidence, fastest first."""
    by: dict[str, list[Trial]] = {}
    for t in trials:
        if t.family in (family, None) and t.status == "ok" and t.value is not None \
                and any(k in t.metrics for k, _ in COLUMNS):
            by.setdefault(", ".join(f"{k} = {v}" for k, v in sorted(t.config.items())), []).append(t)
    rows = [IoRow(cfg, len(ts), statistics.median(t.value for t in ts if t.value is not None),
                  {k: statistics.median(t.metrics[k] for t in ts if k in t.metrics)
                   for k, _ in COLUMNS if any(k in t.metrics for t in ts)})
            for cfg, ts in by.items()]
    return sorted(rows, key=lambda r: r.median_ms)


def html_sections(report: Report, figures: Figures) -> list[tuple[str, str, str]]:
    """The I/O evidence table as (id, heading, body HTML); nothing when no trial carries any (before 16)."""
    rows = io_rows(report.trials)
    if not rows:
        return []
    shown = [(k, h) for k, h in COLUMNS if any(k in r.medians for r in rows)]
    head = "".join(f"<th class=num>{esc(h)}</th>" for _, h in shown)
    body = "".join(
        f"<tr><td><code>{esc(r.config)}</code></td><td class=num>{r.trials}</td><td class=num>{r.median_ms:.0f}</td>"
        + "".join(f"<td class=num>{_num(r.medians[k])}</td>" if k in r.medians else "<td class=num>–</td>"
                  for k, _ in shown) + "</tr>"
        for r in rows)
    why = ("<p>Why the times differ, per configuration measured (medians over its trials): more bytes per read "
           "means the reads were combined; a larger prefetch distance with fewer I/O waits means the look-ahead "
           "kept ahead of the scan; neither moving means the knob did not reach the reads. pg_stat_io counts "
           "every client backend of the server, so on a shared server another client's reads count too.</p>")
    table = (f"<div class=scroll><table><tr><th>configuration</th><th class=num>trials</th>"
             f"<th class=num>median ms</th>{head}</tr>{body}</table></div>")
    return [("io-evidence", "Read I/O evidence", why + table)]


def _num(v: float) -> str:
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.3g}"


def scan_note(decided: Decision) -> str:
    """Each scan kind's median time under today's and the candidate values, over the paired trials."""
    parts = []
    for key, label in (("bitmap_scan_ms", "bitmap heap scans"), ("seq_scan_ms", "sequential scan")):
        base = [t.metrics[key] for t in decided.trials if t.arm == "baseline" and t.status == "ok" and key in t.metrics]
        cand = [t.metrics[key] for t in decided.trials if t.arm == "candidate" and t.status == "ok" and key in t.metrics]
        if base and cand:
            parts.append(f"{label} {statistics.median(base):.0f} -> {statistics.median(cand):.0f} ms")
    return f" ({'; '.join(parts)}: medians of the paired trials)" if parts else ""
