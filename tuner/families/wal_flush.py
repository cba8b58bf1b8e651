"""What a slow WAL flush costs per commit, and what group commit recovered (issue #55 item 4): one sentence for the
WAL report, computed only from the scaling curve's measurements.

* a commit's flush wait: the share of sampled load-backend states waiting on the WAL flush (``IO WALSync``) times a
  client's wall time per transaction (clients x 1000 / TPS): at the fewest clients measured, where nothing else
  shares the flush and the wait is the device's;
* commits per flush: transactions / WAL fsyncs (``pg_stat_wal.wal_sync``, 18+: ``pg_stat_io``) over the same point
  — today's and, where the session recommended a change, the recommendation's at the most clients measured.

A flush is "slow" when a commit waits at least :data:`SLOW_MS` for it: below that, the sentence would name a cost
no WAL setting or device change recovers in a way a DBA would notice, so the report stays quiet.
"""

from __future__ import annotations

from collections.abc import Sequence

from tuner.families.wal_sections import WalContentionOut, WalScalingOut

SLOW_MS = 1.0


def flush_ms_per_commit(point: WalContentionOut) -> float | None:
    """ms one commit spent waiting for its WAL flush at this point, or None when a measurement is missing."""
    if not point.tps or point.wal_sync_wait_share is None or point.tps <= 0:
        return None
    return point.wal_sync_wait_share * point.clients * 1000.0 / point.tps


def _per_flush(fsyncs_per_tx: float | None) -> float | None:
    return 1.0 / fsyncs_per_tx if fsyncs_per_tx and fsyncs_per_tx > 0 else None


def flush_sentence(contention: Sequence[WalContentionOut], scaling: Sequence[WalScalingOut]) -> str | None:
    """The sentence (None when the flush is not slow or not measured): the flush wait per commit at the fewest
    clients, and commits per flush at the most clients, today and at the recommendation."""
    measured = [(c, ms) for c in contention if (ms := flush_ms_per_commit(c)) is not None]
    if not measured:
        return None
    few, ms = min(measured, key=lambda p: (p[0].clients, p[0].rows_per_tx))
    if ms < SLOW_MS:
        return None
    own = 1000.0 * few.clients / few.tps if few.tps else None
    text = (f"Slow WAL flush: each commit waited {ms:.1f} ms for its flush at {few.clients} "
            f"client{'s' * (few.clients != 1)} ({few.rows_per_tx} rows per transaction"
            + (f", {ms / own:.0%} of its {own:.1f} ms" if own else "") + ")")
    shape = [c for c in contention if c.rows_per_tx == few.rows_per_tx and c.wal_fsyncs_per_tx]
    many = max(shape, key=lambda c: c.clients, default=None)
    today = _per_flush(many.wal_fsyncs_per_tx) if many is not None else None
    if many is None or today is None or many.clients == few.clients:
        return text + ("; that flush latency caps each client at 1 commit per flush: a WAL device with faster "
                       "flushes (or more clients committing together) is what raises TPS.")
    rec = next((s for s in scaling if (s.clients, s.rows_per_tx) == (many.clients, many.rows_per_tx)), None)
    rec_per = _per_flush(rec.fsyncs_per_tx_recommended) if rec is not None else None
    text += (f"; at {many.clients} clients {today:.1f} commits shared each flush with today's settings")
    if rec_per is not None:
        gain = (f" ({rec.tps_recommended / rec.tps_current - 1:+.0%} TPS)"
                if rec is not None and rec.tps_current and rec.tps_recommended else "")
        text += f" and {rec_per:.1f} with the recommended ones{gain}"
    return text + (" — group commit recovers the flush only where many clients commit at once; "
                   "a WAL device with faster flushes lowers it for every commit.")
