"""Which value a search's answer becomes, by a stated rule rather than by which probe ran fastest.

On a plateau the search's best point is noise's choice: three sessions on one standby answered eic 8, 1000 and
64, and a daemon that accepted each in turn would have had config management follow it (issue #53). So, per
knob, with the search's near-optimal range (the values its measurements cannot tell apart from the best):

1. today's value, where the range is a plateau (values measured at least a factor of four apart, level with the
   best: :attr:`tuner.report.near.NearRange.plateau`) and today's value lies inside it: nothing worth changing was
   found. Only on a measured plateau: a range the search could not narrow (a joint search's knob judged by the
   model alone spans 0..1000 while eic 1 runs 1.8x slower) is no evidence that today's value is as good — there
   the confirmation against today's decides;
2. else the value accepted before (the store's recommendation in force on this target), where it lies inside:
   the session found it as good as anything, so the answer stays what config management already has;
3. else the search's own answer — on a plateau the smallest ladder value level with the best
   (:meth:`tuner.optimiser.near.RangeFinder._report`), elsewhere its best.

The value chosen is what the confirmation then measures against today's: the answer is the value measured.
Pure: no probe, no store."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tuner.report.near import NearRange


@dataclass(frozen=True)
class Settled:
    """The candidate a search's answer became, and per knob the rule that chose it where it is not the answer."""

    candidate: dict[str, Any]
    notes: dict[str, str] = field(default_factory=dict)  # knob -> one sentence, where rule 1 or 2 chose

    def sentence(self) -> str:
        return "; ".join(self.notes.values())


def _text(near: NearRange) -> str:
    return f"{near.low}..{near.high}" + (" (a plateau)" if near.plateau else "")


def settle(answer: Mapping[str, Any], ranges: Mapping[str, NearRange], today: Mapping[str, Any],
           accepted: Mapping[str, Any] | None = None) -> Settled:
    """The candidate for each knob of ``answer`` (the search's), chosen by the rule above from its near-optimal
    range in ``ranges``, today's value and the ``accepted`` value (the store's, where one is in force). A knob
    without a range, or whose values are not numbers, keeps the search's answer."""
    accepted = accepted or {}
    candidate = dict(answer)
    notes: dict[str, str] = {}
    for knob, value in answer.items():
        near = ranges.get(knob)
        now = today.get(knob)
        if near is None or not isinstance(value, int) or isinstance(value, bool):
            continue
        if isinstance(now, int) and not isinstance(now, bool) and near.plateau and near.holds(now):
            if now != value:
                notes[knob] = (f"kept today's {knob} = {now}: inside the near-optimal {_text(near)} "
                               f"(the search's best was {value})")
            candidate[knob] = now
            continue
        before = accepted.get(knob)
        if isinstance(before, int) and not isinstance(before, bool) and near.holds(before):
            if before != value:
                notes[knob] = (f"kept the accepted {knob} = {before}: inside today's near-optimal {_text(near)} "
                               f"(the search's best was {value})")
            candidate[knob] = before
    return Settled(candidate, notes)
