"""One tuning step, the same for every family: a stored recommendation pinned to the family is re-validated in
paired trials (no search); else a warm start from the latest stored session on a matching target, the optimiser
the benchmarks measure (:func:`tuner.core.loops.build_optimiser`), the search, and — unless the family confirms
its own way (a joint search whose knobs it confirms one by one) — the decision against today's values.

The family keeps what is its own: the probe, the dimensions and today's values, the recommendation's fields and
the report's outcome. It is given the context structurally (:class:`Context`), so this layer needs nothing from
the families' layer above it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from tuner.core.decide import Decision, decide
from tuner.core.progress import Progress
from tuner.core.loops import Probe, build_optimiser, search
from tuner.core.plateau import Settled, settle
from tuner.report.model import Trial
from tuner.report.near import NearOptimal, NearRange
from tuner.optimiser import BaseOptimiser, Dimension, Suggestion
from tuner.settings.policy import Policy
from tuner.store.priors import StoredPrior


class History(Protocol):
    async def prior(self, family: str) -> StoredPrior | None: ...


class PinLike(Protocol):
    @property
    def near_optimal(self) -> Mapping[str, tuple[int, int]]: ...

    def against(self, today: dict[str, int]) -> tuple[dict[str, int], dict[str, int]]: ...

    def note(self) -> str: ...


class Seeded(Protocol):
    @property
    def seed(self) -> int: ...


class Settings(Protocol):
    @property
    def tuner(self) -> Seeded: ...


class Context(Protocol):
    """What a tuning step reads of a family's context (:class:`tuner.families.base.FamilyContext` has it)."""

    @property
    def cfg(self) -> Settings: ...
    @property
    def policy(self) -> Policy: ...
    @property
    def budget(self) -> int | None: ...
    @property
    def progress(self) -> Progress: ...
    @property
    def history(self) -> History | None: ...
    @property
    def pins(self) -> Mapping[str, PinLike]: ...
    @property
    def accepted(self) -> Mapping[str, Any]: ...


@dataclass
class Tuned:
    """What one tuning step found and decided."""

    trials: list[Trial] = field(default_factory=list)  # the search's, then the decision's
    decided: Decision | None = None  # None: the search found nothing, or the family confirms its own way
    found: Suggestion | None = None  # the search's optimum (None for a pin, or when nothing was found)
    stop_reason: str | None = None  # the search's
    warm_start: str | None = None  # for the report: where the search started from, or the pin it re-validated
    optimiser: str | None = None  # the optimiser's kind (None for a pin)
    pinned: bool = False  # a stored recommendation was re-validated instead of searching
    # The search's answer as the plateau rule settled it (:mod:`tuner.core.plateau`): what is confirmed and
    # recommended (None for a pin, or when nothing was found).
    settled: Settled | None = None

    @property
    def candidate(self) -> dict[str, Any] | None:
        return None if self.settled is None else self.settled.candidate

    @property
    def failed(self) -> bool:
        """The search ran and found nothing to recommend."""
        return not self.pinned and self.found is None


def warm_note(prior: StoredPrior | None, optimiser: Any) -> str | None:
    """What a report says about a search's warm start (None: it started cold, with nothing stored to start from)."""
    if prior is None:
        return None
    how = getattr(optimiser, "prior_status", None) or "its trials were offered to the optimiser"
    return f"session {prior.session_id} of {prior.started_at} (same {prior.matched_by}): {how}"


async def tune(
    ctx: Context,
    family: str,
    probe: Probe,
    dims: list[Dimension],
    current: dict[str, int],
    *,
    metric: str = "execution_time_ms",
    confirm: bool = True,
    warm_start: bool = True,
    object: str | None = None,
    pinned: dict[str, int] | None = None,
    accepted: Mapping[str, Any] | None = None,
) -> Tuned:
    """One tuning step of ``family`` over ``dims`` from today's values ``current``.

    A pin of ``family`` (the daemon's re-validation) is confirmed against ``pinned`` (default ``current``: the
    values the pin's knobs have today) with no search. Else, with ``warm_start`` and a history, the search
    starts from the latest stored session's trials of exactly these knobs (on ``object`` only, where given: a
    device's search); ``confirm``: the search's optimum is then confirmed against ``current`` in paired trials
    (:func:`tuner.core.decide.decide`) and the decision is in ``decided``.

    The optimum confirmed is the search's answer as the plateau rule settles it (``settled``): today's value
    where it lies inside the near-optimal range, else the value accepted before (``accepted``, default the
    context's values in force for these knobs), else the search's answer."""
    policy, progress = ctx.policy, ctx.progress
    pin = ctx.pins.get(family)
    if pin is not None:
        today = dict(current if pinned is None else pinned)
        before, candidate = pin.against(today)
        decided = await decide(before, candidate, probe, policy, metric=metric,
                               near_optimal=NearOptimal.of_pairs(pin.near_optimal), progress=progress,
                               baseline_is_today=before == today)
        return Tuned(list(decided.trials), decided, warm_start=pin.note(), pinned=True)
    prior, warm = await _warm(ctx, family, current, object) if warm_start else (None, {})
    optimiser: BaseOptimiser = build_optimiser(policy, dims, current, seed=ctx.cfg.tuner.seed, budget=ctx.budget,
                                               **warm)
    found = await search(optimiser, probe, max_consecutive_failures=policy.guardrails.max_failed_probes,
                         progress=progress)
    out = Tuned(list(found.trials), found=found.recommendation, stop_reason=found.stop_reason,
                warm_start=warm_note(prior, optimiser), optimiser=optimiser.kind)
    if found.recommendation is None:
        return out
    answer = {k: found.recommendation.config[k] for k in current}
    if accepted is None:
        accepted = {k: ctx.accepted[k] for k in current if k in ctx.accepted}
    out.settled = settle(answer, _ranges(found.recommendation.near_optimal), current, accepted)
    if confirm:
        out.decided = with_rule(await decide(current, out.settled.candidate, probe, policy, metric=metric,
                                             near_optimal=found.recommendation.near_optimal, progress=progress),
                                out.settled)
        out.trials.extend(out.decided.trials)
    return out


def _ranges(near: Any) -> dict[str, NearRange]:
    """The per-knob ranges of a search's reported answer (a ``NearOptimal``; nothing otherwise)."""
    return dict(near.ranges) if isinstance(near, NearOptimal) else {}


def with_rule(decided: Decision, settled: Settled) -> Decision:
    """``decided`` with the plateau rule's sentence in its reason, where the rule chose another value than the
    search's answer (a candidate that is today's value says why it is, not that the model predicted it)."""
    if not settled.notes:
        return decided
    reason = (settled.sentence() if decided.candidate == decided.current
              else f"{decided.reason}; {settled.sentence()}")
    decided.reason = reason
    return decided


async def _warm(ctx: Context, family: str, current: Mapping[str, int],
                object: str | None) -> tuple[StoredPrior | None, dict[str, Any]]:
    """The latest stored session's trials of exactly these knobs, as ``build_optimiser``'s arguments; a stored
    session without such trials (another knob set, another device) is no warm start."""
    prior = await ctx.history.prior(family) if ctx.history else None
    if prior is None:
        return None, {}
    warm = prior.for_knobs(current, object=object)
    return (prior, warm) if warm["prior"] else (None, {})
