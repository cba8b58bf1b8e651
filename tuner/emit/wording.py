"""How every emitter words a decision in prose, so that a "keep" never reads like a change.

"2560 -> 512 (keep)" reads as a change with a footnote; a keep is said as a keep, naming what was searched and
why it did not win. A change is said as ``old -> new``. Plain text; each emitter quotes it its own way.
"""

from __future__ import annotations

from tuner.model import Recommendation


def kept(rec: Recommendation, *, why: bool = True) -> str:
    """``keep 2560 (searched 512; not shown better by the minimum effect)`` — or, without ``why``, the short form
    a figure's label has room for. A keep whose candidate is today's value says so instead."""
    if str(rec.recommended) == str(rec.current):
        return f"keep {rec.current}" + (" (no value searched measured better)" if why else "")
    reason = "; not shown better by the minimum effect" if why else ""
    return f"keep {rec.current} (searched {rec.recommended}{reason})"


def decided(rec: Recommendation, label: str, *, arrow: str = "->") -> str:
    """One clause for a decision about ``label``: ``label: 1 -> 256`` for a change, ``label: keep 1 (…)`` for a
    keep."""
    if rec.decision == "change":
        return f"{label}: {rec.current} {arrow} {rec.recommended}"
    return f"{label}: {kept(rec)}"
