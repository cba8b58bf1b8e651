"""The one decision path: today's configuration against the search's candidate, confirmed in paired trials,
turned into keep / change with its effect, its reason and the near-optimal range. Every family decides here, so
a decision reads the same whichever knob it is about.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field
from typing import Any, Literal

from tuner.core.loops import NullProgress, Probe, Progress, confirm, effect_out
from tuner.core.stats import Look, SequentialTest
from tuner.report.model import EffectOut, Recommendation, Trial
from tuner.report.near import NearOptimal, NearRange
from tuner.optimiser.space import pooled_sd
from tuner.settings.policy import Policy

Values = dict[str, Any]

NOTHING_TO_CONFIRM = "today's value is the model's predicted optimum; nothing to confirm"
TODAY_IN_OPTIMUM = "today's value is in the model's predicted optimum"


def confirmation_test(policy: Policy) -> SequentialTest:
    """The sequential paired test the policy asks for (``tuner daemon`` passes ``policy.for_daemon()``)."""
    return SequentialTest(min_pairs=policy.budget.confirm_min_pairs, max_pairs=policy.budget.confirm_max_pairs,
                          alpha=policy.decision.alpha, min_effect=policy.decision.min_effect,
                          interim_looks=policy.budget.confirm_looks)


@dataclass
class Decision:
    """The outcome of comparing ``candidate`` with ``current``."""

    current: Values
    candidate: Values
    decision: Literal["change", "keep"]
    reason: str
    effect: EffectOut | None = None
    look: Look | None = None
    trials: list[Trial] = field(default_factory=list)
    near_optimal: dict[str, NearRange] = field(default_factory=dict)

    @property
    def confirmed(self) -> bool:
        """Paired trials ran to a verdict (change or keep)."""
        return self.look is not None


def _range_text(near: NearRange) -> str:
    return (f"the plateau from {near.low} to {near.high}" if near.plateau
            else f"the near-optimal range {near.low}..{near.high}")


def _today_inside(current: Values, candidate: Values, near: dict[str, NearRange]) -> str | None:
    """The one knob that differs between ``current`` and ``candidate`` where today's value lies inside its
    near-optimal range, else None (several knobs differ: the per-knob ranges cross at the candidate, and say
    nothing about today's combination)."""
    moved = [k for k in candidate if candidate[k] != current.get(k)]
    if len(moved) != 1 or moved[0] not in near or not isinstance(current.get(moved[0]), int):
        return None
    knob = moved[0]
    return knob if near[knob].holds(current[knob]) else None


async def decide(
    current: Values,
    candidate: Values,
    probe: Probe,
    policy: Policy,
    *,
    metric: str = "execution_time_ms",
    near_optimal: NearOptimal | None = None,
    progress: Progress | None = None,
    baseline_is_today: bool = True,
) -> Decision:
    """Confirm ``candidate`` against ``current`` in ABBA-ordered pairs (unless they are the same) and decide.

    A change needs the whole interval past the policy's minimum effect; a confirmation that cannot finish
    (its probes keep failing) keeps today's value and says why. The near-optimal range is the search's (the
    values its measurements cannot tell apart from the best): a "keep" whose today's value lies inside it says
    so; a "change" tells today's value apart, so where the range held it, it is cut short of it. A range that
    does not hold the candidate (a runner-up confirmed instead of the search's best) says nothing about it and
    is left out. ``baseline_is_today``: False where ``current`` is not what the server runs (a re-validation
    of an applied recommendation against the values it replaced), so that a reason does not call it today's.
    """
    near = dict(near_optimal.ranges) if near_optimal is not None else {}
    if candidate == current:
        ranges = [f"{k}: {_range_text(near[k])}" for k in candidate if k in near]
        reason = NOTHING_TO_CONFIRM + (f" (the search's measurements cannot tell it from the best: "
                                       f"{', '.join(ranges)})" if ranges else "")
        return Decision(current, candidate, "keep", reason, near_optimal=near)
    test = confirmation_test(policy)
    checked = await confirm(current, candidate, probe, test, progress=progress or NullProgress())
    if checked.look is None:
        return Decision(current, candidate, "keep", f"confirmation could not finish: {checked.failure}",
                        trials=checked.trials, near_optimal=near)
    look = checked.look
    # The confirmation read both arms again and again: how much one reading varies — within each arm, drift
    # between blocks included — is measured now, and the search's ranges widen to it where its model assumed
    # less (``NearOptimal.given_noise``; ranges without a search to widen them, as a pin's, stay as they are).
    noise = reading_noise(checked.trials)
    if noise is not None and near_optimal is not None and near_optimal.widen is not None:
        # A refit of the search's model: in a thread, so that a daemon's loop keeps answering meanwhile.
        near = dict((await asyncio.to_thread(near_optimal.given_noise, noise)).ranges)
    verdict: Literal["change", "keep"] = "change" if look.verdict == "change" else "keep"
    reason = look.reason
    knob = _today_inside(current, candidate, near)
    if knob is not None and verdict == "keep":
        whose = "today's value" if baseline_is_today else "the value it was compared with,"
        reason += f"; {whose} {current[knob]} lies inside {_range_text(near[knob])}"
    elif knob is not None:
        cut = near[knob].without(current[knob], keep=candidate[knob])
        if cut is None:
            near.pop(knob)
        else:
            near[knob] = cut
    for k in [k for k, v in candidate.items() if k in near and not near[k].holds(v)]:
        near.pop(k)
    return Decision(current, candidate, verdict, reason, effect_out(look, test, metric=metric, pairs=checked.pairs),
                    look, checked.trials, near)


def reading_noise(trials: list[Trial]) -> float | None:
    """The standard deviation of log(time) of one reading, pooled within the arms of a confirmation's trials
    (None with fewer than two degrees of freedom)."""
    arms: dict[str, list[float]] = {}
    for t in trials:
        if t.status == "ok" and t.value is not None and t.value > 0 and t.arm is not None:
            arms.setdefault(t.arm, []).append(math.log(t.value))
    if sum(len(v) - 1 for v in arms.values() if v) < 2:
        return None
    return pooled_sd(list(arms.values()))


def recommendation(
    knob: str,
    decided: Decision,
    *,
    source: str,
    requires: Literal["reload", "restart", "reopen"],
    scope: Literal["system", "tablespace", "device"] = "system",
    object: str | None = None,
    run_on: Literal["target", "primary", "host"] = "target",
    **extra: Any,
) -> Recommendation:
    """One knob's recommendation from a decision: a knob whose candidate is today's value is kept without
    evidence of its own; the others share the decision, and name the knobs confirmed with them."""
    now, best = decided.current[knob], decided.candidate[knob]
    moved = [k for k in decided.current if k != knob and decided.candidate.get(k) != decided.current[k]]
    if best == now and decided.candidate != decided.current:
        decision, reason, effect = "keep", TODAY_IN_OPTIMUM, None
    else:
        decision, reason, effect = decided.decision, decided.reason, decided.effect
    fields: dict[str, Any] = dict(
        knob=knob, scope=scope, object=object, current=now, recommended=best, source=source,
        near_optimal=decided.near_optimal.get(knob), decision=decision, reason=reason, effect=effect,
        requires=requires, run_on=run_on, together_with=moved if decision == "change" else [],
    )
    fields.update(extra)
    return Recommendation(**fields)


async def shares(
    current: Values,
    combination: Decision,
    probe: Probe,
    policy: Policy,
    *,
    metric: str = "execution_time_ms",
    progress: Progress | None = None,
) -> dict[str, Decision]:
    """Each knob's own share of a combination confirmed against ``current`` (today's): per knob the
    combination moved, the combination with that knob put back to today's value against the combination, in
    paired trials — so each recommendation carries its own interval, and a knob whose share does not clear the
    minimum effect is kept. A combination kept as a whole has no shares (every knob keeps its evidence); a
    combination that moved one knob is that knob's share."""
    if combination.decision != "change":
        return {}
    candidate = combination.candidate
    moved = [k for k in candidate if candidate[k] != current.get(k)]
    if len(moved) == 1:
        return {moved[0]: combination}
    out: dict[str, Decision] = {}
    for knob in moved:
        others = ", ".join(f"{k} = {candidate[k]}" for k in moved if k != knob)
        decided = await decide({**candidate, knob: current[knob]}, candidate, probe, policy, metric=metric,
                               progress=progress, baseline_is_today=False)
        decided.reason = f"on its own (against today's {current[knob]}, at {others}): {decided.reason}"
        decided.near_optimal = dict(combination.near_optimal)  # the search's ranges, as the combination left them
        out[knob] = decided
    return out
