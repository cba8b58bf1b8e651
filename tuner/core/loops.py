"""One tuning session: search, confirm, decide. The loops here are pure — they get the probe runner as a
parameter — so they are tested with a synthetic probe, and run unchanged against a real server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from tuner.log import get_logger
from tuner.session.stop import STOP
from tuner.report.model import EffectOut, Trial
from tuner.optimiser import BaseOptimiser, BayesianOptimiser, Dimension, Suggestion, initial_design
from tuner.settings.policy import Policy
from tuner.core.progress import NullProgress, Progress
from tuner.core import per_query
from tuner.core.stats import Look, SequentialTest, abba_blocks, log_ratio

log = get_logger("tuner.core.loops")


class Probe(Protocol):
    def __call__(
        self,
        config: dict[str, int],
        *,
        phase: Literal["search", "confirm"] = ...,
        arm: Literal["baseline", "candidate"] | None = ...,
    ) -> Awaitable[Trial]: ...


def build_optimiser(
    policy: Policy,
    dimensions: list[Dimension],
    current: dict[str, int],
    *,
    seed: int,
    budget: int | None = None,
    prior: Sequence[tuple[Mapping[str, int], float]] = (),
    previous: Mapping[str, int] | None = None,
) -> BayesianOptimiser:
    """The optimiser ``tuner recommend`` runs for these knobs (the benchmarks call this too).

    Initial design: today's values (for one knob, unless its policy sets ``today_first = false``), then the
    policy's starting values. A joint search takes every combination of at most three per knob — the policy's
    ``joint_initial``, or the first, the middle and the last of its list — so that a 3 × 3
    start leaves half its budget to the model. A joint search spends its whole budget (its last probes
    re-measure two leaders); a 1-D search may stop early by its own rule.

    A warm start: ``prior`` holds observations (configuration, ms) of earlier sessions on this target, oldest
    first, and ``previous`` the configuration the last of them recommended. The initial design is then today's
    values and ``previous`` (once each): both are measured again today, and the prior is rescaled by how their
    times moved before the model uses it (``BaseOptimiser``). The policy's design is the fallback where the
    prior cannot be used. Without a prior the search is the cold one above, unchanged.
    """
    search_of = {d.name: policy.search[d.name] for d in dimensions if d.name in policy.search}
    starts = {k: tuple(s.initial) for k, s in search_of.items()}
    joint = len(dimensions) > 1
    if joint:
        starts = {
            k: tuple(search_of[k].joint_initial) or ((v[0], v[len(v) // 2], v[-1]) if len(v) > 3 else v)
            for k, v in starts.items()
        }
    # One knob: today's value first unless the policy says the model should ask for it like any other value.
    today = joint or not starts or search_of[dimensions[0].name].today_first
    probes = budget if budget is not None else (policy.budget.joint_probes if joint else policy.budget.probes)
    design = initial_design(dimensions, current, starts, today=today)
    warm: list[Mapping[str, int]] = []
    if prior:
        warm = [{d.name: d.snap(current[d.name]) for d in dimensions}]
        if previous is not None and all(d.name in previous for d in dimensions):
            warm.append({d.name: d.snap(previous[d.name]) for d in dimensions})
    return BayesianOptimiser(
        dimensions=dimensions,
        initial=warm or design,
        seed=seed,
        budget=probes,
        min_probes=probes if joint else min(policy.budget.min_probes, probes),
        patience=policy.budget.patience,
        tolerance=policy.decision.near_optimal_tolerance,
        prior=prior,
        previous=warm[1] if len(warm) > 1 else None,
        fallback=design if warm else (),
        min_effect=policy.decision.min_effect,
        alpha=policy.decision.alpha,
    )


@dataclass
class SearchResult:
    trials: list[Trial] = field(default_factory=list)
    recommendation: Suggestion | None = None
    stop_reason: str = ""


async def search(
    optimiser: BaseOptimiser,
    probe: Probe,
    *,
    max_consecutive_failures: int,
    progress: Progress | None = None,
) -> SearchResult:
    """The ask/tell loop: probe what the optimiser suggests until its stopping rule or the budget ends it."""
    progress = progress or NullProgress()
    progress.phase("search", optimiser.budget)
    result = SearchResult()
    # The optimiser's model fits run in a thread (one at a time: the loop awaits each), so that the event loop —
    # the daemon's /metrics and watchdog, a terminal's progress — is not held for the fit (0.1–0.5 s on 2 cores).
    while True:
        reason = await asyncio.to_thread(optimiser.stop_reason)
        if reason:
            result.stop_reason = reason
            break
        if optimiser.history.consecutive_failures() >= max_consecutive_failures:
            last = result.trials[-1].reason if result.trials else "unknown"
            result.stop_reason = f"{max_consecutive_failures} probes in a row failed (last: {last})"
            break
        STOP.check()
        config = await asyncio.to_thread(optimiser.suggest)
        trial = await probe(config, phase="search")
        result.trials.append(trial)
        await asyncio.to_thread(optimiser.register, config, trial.value if trial.status == "ok" else None)
        shown = ", ".join(f"{k}={v}" for k, v in config.items())
        progress.advance(f"{shown}: {trial.value:.4g} ms" if trial.value is not None else f"{shown}: {trial.status}")
    if optimiser.history.ok:
        result.recommendation = await asyncio.to_thread(optimiser.recommendation)
    return result


@dataclass
class ConfirmResult:
    trials: list[Trial] = field(default_factory=list)
    look: Look | None = None
    failure: str | None = None
    # The ok trials as the test paired them, (baseline, candidate): each query's own ratios come from them.
    pairs: list[tuple[Trial, Trial]] = field(default_factory=list)


async def confirm(
    baseline: dict[str, int],
    candidate: dict[str, int],
    probe: Probe,
    test: SequentialTest,
    *,
    progress: Progress | None = None,
    retries: int = 1,
) -> ConfirmResult:
    """Paired, interleaved trials in ABBA / BAAB blocks until the sequential test decides."""
    progress = progress or NullProgress()
    progress.phase("confirm", test.max_pairs * 2)
    out = ConfirmResult()
    d: list[float] = []
    for block in abba_blocks():
        values: list[float] = []
        oks: list[Trial] = []
        for arm in block:
            cfg = baseline if arm == "A" else candidate
            arm_name: Literal["baseline", "candidate"] = "baseline" if arm == "A" else "candidate"
            for _attempt in range(retries + 1):
                STOP.check()
                trial = await probe(cfg, phase="confirm", arm=arm_name)
                out.trials.append(trial)
                if trial.status == "ok" and trial.value is not None:
                    values.append(trial.value)
                    oks.append(trial)
                    progress.advance(f"{arm_name}: {trial.value:.4g} ms")
                    break
            else:
                out.failure = f"a {arm_name} probe failed {retries + 1} times during confirmation: {trial.reason}"
                return out
        # Adjacent pairs within the block: (1st, 2nd) and (3rd, 4th); orient each as baseline/candidate.
        for i in (0, 2):
            a, b = (values[i], values[i + 1]) if block[i] == "A" else (values[i + 1], values[i])
            d.append(log_ratio(a, b))
            out.pairs.append((oks[i], oks[i + 1]) if block[i] == "A" else (oks[i + 1], oks[i]))
        look = test.evaluate(d)
        if look is not None:
            out.look = look
            if look.verdict != "continue":
                return out
    raise AssertionError("unreachable: the sequential test always ends at max_pairs")


def effect_out(look: Look, test: SequentialTest, metric: str = "execution_time_ms",
               pairs: Sequence[tuple[Trial, Trial]] = ()) -> EffectOut:
    """The report's effect of a finished confirmation, with each query's own (:mod:`tuner.core.per_query`) where
    ``pairs`` carry per-query times."""
    e = look.effect
    return EffectOut(
        queries=per_query.effects(pairs, test, looks_done=e.looks),
        metric=metric,
        improvement=round(e.improvement, 4),
        ci95=(round(e.ci_low, 4), round(e.ci_high, 4)),
        decision_ci=(round(e.decision_low, 4), round(e.decision_high, 4)),
        n_pairs=e.n_pairs,
        p_value=float(f"{e.p_value:.3g}"),
        looks=e.looks,
        method=(
            f"paired log-ratios in ABBA blocks; decided with Pocock-level t-intervals over {len(test.looks)} "
            f"planned looks (alpha {test.alpha:g}); ci95 is a t-interval at {e.report_confidence:.3f}, "
            "calibrated for optional stopping"
        ),
    )

