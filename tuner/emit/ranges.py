"""What every emitter says about a recommendation's near-optimal range: a plateau as a plateau, and a recommended
value at the edge of the searched range as such — so that one value of a level stretch is not read as a sharp
optimum, nor a value the search could not look beyond as the last word. Plain text; each emitter quotes it its
own way."""

from __future__ import annotations

from tuner.report.model import Recommendation


def cell(rec: Recommendation) -> str:
    """The near-optimal column: ``A..B``, or ``plateau A..B``; ``-`` without a range."""
    if rec.near_optimal is None:
        return "-"
    lo, hi = rec.near_optimal
    return f"plateau {lo}..{hi}" if rec.plateau else f"{lo}..{hi}"


def recommended_cell(rec: Recommendation) -> str:
    """The recommended column: the value, marked where it is the lowest or highest value searched."""
    return f"{rec.recommended} (edge)" if rec.at_edge else str(rec.recommended)


def notes(rec: Recommendation) -> list[str]:
    """Sentences about the range: the plateau, and the edge of the searched range (none for an ordinary range)."""
    out = []
    if rec.near_optimal is not None and rec.plateau:
        lo, hi = rec.near_optimal
        # Today's value on the plateau: said once (the decision's reason may say it already), and only for a
        # knob decided on its own (confirmed together with others, the ranges cross at the candidate and say
        # nothing about today's combination).
        today = (isinstance(rec.current, int) and lo <= rec.current <= hi and rec.decision == "keep"
                 and "today's value" not in rec.reason and not rec.together_with)
        pick = f"; today's value {rec.current} lies on it: keep it" if today else ""
        top = ""
        if rec.searched is not None and hi >= rec.searched[1]:
            top = f", up to the top of the searched range {rec.searched[0]}..{rec.searched[1]}"
        out.append(f"plateau from {lo} to {hi}{top}: the measurements cannot tell these values apart from the best "
                   f"(within the policy's minimum effect and confidence){pick}")
    if rec.at_edge is not None and rec.searched is not None:
        lo, hi = rec.searched
        word = "highest" if rec.at_edge == "upper" else "lowest"
        if rec.edge_is_limit:
            why = f"{'its maximum' if rec.at_edge == 'upper' else 'its minimum'} on this server"
            if rec.knob == "io_combine_limit" and rec.at_edge == "upper":
                why += " (io_max_combine_limit caps it; raising that takes a restart)"
            out.append(f"at the edge: {rec.recommended} is the {word} value searched ({lo}..{hi}), {why}")
        elif (rec.plateau and rec.near_optimal is not None and isinstance(rec.recommended, int)
              and rec.near_optimal[0] <= rec.recommended <= rec.near_optimal[1]):
            # The answer is the plateau's own end (its smallest value, by choice), not a slope still falling.
            bound = "min" if rec.at_edge == "lower" else "max"
            out.append(f"at the edge: the plateau reaches the {word} value searched ({lo}..{hi}, the policy's range), "
                       f"{rec.recommended}; values beyond it were not measured (widen [search.{rec.knob}] {bound} to "
                       "look further)")
        else:
            bound = "max" if rec.at_edge == "upper" else "min"
            out.append(f"at the edge: {rec.recommended} is the {word} value searched ({lo}..{hi}, the policy's "
                       f"range): the optimum may lie beyond it; widen [search.{rec.knob}] {bound} to look further")
    return out
