"""The one decision path: today's configuration against the search's candidate, confirmed in paired trials,
turned into keep / change with its effect, its reason and the near-optimal range. Every family decides here, so
a decision reads the same whichever knob it is about.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from tuner.core.session import NullProgress, Probe, Progress, confirm, effect_out
from tuner.core.stats import Look, SequentialTest
from tuner.model import EffectOut, Recommendation, Trial
from tuner.policy import Policy

Config = dict[str, Any]

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

    current: Config
    candidate: Config
    decision: Literal["change", "keep"]
    reason: str
    effect: EffectOut | None = None
    look: Look | None = None
    trials: list[Trial] = field(default_factory=list)
    near_optimal: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def confirmed(self) -> bool:
        """Paired trials ran to a verdict (change or keep)."""
        return self.look is not None


async def decide(
    current: Config,
    candidate: Config,
    probe: Probe,
    policy: Policy,
    *,
    metric: str = "execution_time_ms",
    near_optimal: dict[str, tuple[int, int]] | None = None,
    progress: Progress | None = None,
) -> Decision:
    """Confirm ``candidate`` against ``current`` in ABBA-ordered pairs (unless they are the same) and decide.

    A change needs the whole interval past the policy's minimum effect; a confirmation that cannot finish
    (its probes keep failing) keeps today's value and says why.
    """
    near = dict(near_optimal or {})
    if candidate == current:
        return Decision(current, candidate, "keep", NOTHING_TO_CONFIRM, near_optimal=near)
    test = confirmation_test(policy)
    checked = await confirm(current, candidate, probe, test, progress=progress or NullProgress())
    if checked.look is None:
        return Decision(current, candidate, "keep", f"confirmation could not finish: {checked.failure}",
                        trials=checked.trials, near_optimal=near)
    look = checked.look
    return Decision(current, candidate, "change" if look.verdict == "change" else "keep", look.reason,
                    effect_out(look, test, metric=metric), look, checked.trials, near)


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
