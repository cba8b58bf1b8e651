"""Search over knob values: a Bayesian optimiser (scikit-optimize, ask/tell) and a random-search twin.

Both optimisers share one interface:

* ``suggest()`` returns the next configuration to probe (the initial design first);
* ``register(config, value_ms)`` records a probe — ``None`` for a failed probe, which is kept as failed and
  never told to the model as a number;
* ``recommendation()`` returns the configuration to confirm and its near-optimal range;
* ``stop_reason()`` says why the search should end now, or None.

A warm start: ``prior=`` observations (configuration, ms) of earlier sessions on the same target and
``previous=`` the last answer; the search re-measures today's values and that answer first, rescales the prior
onto today's times from the configurations measured in both, and fits the model on it (one point per
configuration) and this session's probes — or, with no configuration measured in both, does without it
(``prior_status`` says which, ``prior_dropped`` counts what the search could not hold). Probes, the budget and
failures count this session only.

The model works on log(time) (multiplicative noise becomes additive), over each knob's transformed scale
(``log2p1``: log2(1 + value), so 0 is reachable and 1, 3, 7, 15 … are evenly spaced). The recommendation
comes from the model's posterior mean, not from the luckiest observation (winner's curse).

The near-optimal range (``Suggestion.near_optimal``, a ``tuner.report.near.NearOptimal`` of per-knob
``NearRange``s) is the values the measurements cannot tell apart from the best by more than the policy's
minimum effect, at its ``1 − alpha``: a value measured in this session is left out only where its readings'
mean exceeds the best's by more than log(``min_effect``) plus that interval (the model's noise per reading); a
value between measured ones, only where the model's interval for the difference — posterior mean and spread,
their covariance counted — lies wholly above it. It is the unbroken run around the best (per knob, the other
knobs at the best), never past the values measured. ``NearOptimal.given_noise`` widens it once repeated readings
(the confirmation's) show more noise than the model assumed. Where measured values at least two octaves apart
are level with the best (the model and their readings within half the tolerance), the range is a plateau and
the answer its smallest such value. The search — what it probes, when it stops — follows its own answer and
tolerance box, untouched by this (``BaseOptimiser._answer``).

Modules: ``space`` (knobs, configurations, the answer, the history), ``design`` (where a search starts),
``base`` (shared bookkeeping, random search), ``prior`` (earlier sessions' observations: kept, compressed,
calibrated), ``gp`` (the Bayesian optimiser; the only module that imports scikit-optimize), ``posterior`` (the
fitted GP it mixes in: fit and predictions, at a bounded cost per probe), ``rules`` and ``rule_api`` (the rules it
holds, one object each, with its constants and its reason), ``near`` (what the answer reports: its near-optimal ranges, the plateau).
"""

from tuner.optimiser.base import BaseOptimiser, RandomOptimiser
from tuner.optimiser.design import initial_design, space_filling
from tuner.optimiser.gp import BayesianOptimiser
from tuner.optimiser.space import Point, Dimension, Suggestion

OPTIMISERS: dict[str, type[BaseOptimiser]] = {
    BayesianOptimiser.kind: BayesianOptimiser,
    RandomOptimiser.kind: RandomOptimiser,
}

__all__ = [
    "OPTIMISERS",
    "BaseOptimiser",
    "BayesianOptimiser",
    "Point",
    "Dimension",
    "RandomOptimiser",
    "Suggestion",
    "initial_design",
    "space_filling",
]
