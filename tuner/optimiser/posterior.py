"""The fitted GP as the optimiser reads it: what it is fitted on (a calibrated prior and this session's probes),
how its hyperparameters are fitted, and its predictions — mean, spread, expected improvement — remembered
until the next fit. ``gp`` holds scikit-optimize; this module sees its estimator only through scikit-learn's
interface.

Cost per probe (benchmarks/optimiser_cost.py): skopt's default GP fit runs three L-BFGS searches of the
hyperparameters (two random restarts), and its ``tell()`` then drew 2000 random points and evaluated the
acquisition on them for an ``ask()`` the searches seldom make. Up to ``FULL_FIT_POINTS`` fitted points — every
cold search of a shipped policy — the fit and every prediction are skopt's own, computed as before; above it
the hyperparameters are re-fitted only as the fitted set grows (``REFIT_GROWTH``), from the last fit's, and the
predictive spread is computed with one matrix product instead of skopt's three-operand ``einsum``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tuner.optimiser.space import Point, Dimension, History, key_of

if TYPE_CHECKING:
    from tuner.optimiser.prior import Prior

# Fitted sets up to this size get skopt's full fit and skopt's predictions (a cold search: every shipped
# budget, 20 at most, so those searches are unchanged, bit for bit). Above it, hyperparameters carry over.
FULL_FIT_POINTS = 24
# Above FULL_FIT_POINTS, the hyperparameters are searched again (from the last ones, without restarts) once the
# fitted set has grown by this share since they were; in between, a fit is one Cholesky factorisation.
REFIT_GROWTH = 0.1


class Posterior:
    """Mixed into ``BayesianOptimiser``: ``fit`` after each probe, ``predict``/``_posterior`` for the rules.

    The public hooks (benchmarks/optimiser_cost.py's baseline is built from them): ``fit`` is the one place the GP
    is fitted and may be overridden, handing its model over with ``use_fit``; ``fitted_points`` is the size of the
    set the model was fitted on; ``remember_predictions`` and ``full_fit_points`` (class attributes) say whether
    predictions are kept until the next fit and up to which fitted size skopt's own fit and arithmetic are used.
    """

    # Predictions are remembered until the next fit (one probe's rules ask for the same configurations many
    # times over); False computes every one afresh.
    remember_predictions: bool = True
    # Up to this many fitted points, skopt's full fit and its own predictions; above, hyperparameters carry over
    # and the spread is one matrix product (the module's docstring).
    full_fit_points: float = FULL_FIT_POINTS

    dimensions: tuple[Dimension, ...]
    history: History
    _prior: Prior
    _opt: Any  # skopt's Optimizer: its space's transform, its estimator, the session's Xi and yi

    if TYPE_CHECKING:  # provided by BaseOptimiser

        @property
        def prior_in_use(self) -> bool: ...
        def _prior_configs(self) -> list[Point]: ...

    def _init_posterior(self) -> None:
        self._model: Any = None  # the GP fitted last, or None before the initial design has been measured
        self._fitted_y: list[float] = []  # the log(times) it was fitted on (the prior first, calibrated)
        self._searched_at = 0  # the fitted set's size when the hyperparameters were last searched
        self._predictions: dict[tuple[object, ...], Any] = {}  # per fit: predictions already made

    def _z(self, config: Mapping[str, int]) -> list[float]:
        return [d.to_z(config[d.name]) for d in self.dimensions]

    def _training_set(self) -> tuple[list[list[float]], list[float]]:
        """What the GP is fitted on: the prior in use (one point per configuration, rescaled onto this session),
        then this session's successful probes in order — without a prior, exactly what skopt was told."""
        if not self.prior_in_use:
            return self._opt.Xi, self._opt.yi
        offset = self._prior.offset
        assert offset is not None
        xs = [[d.to_z(v) for d, v in zip(self.dimensions, k, strict=True)] for k in self._prior.points]
        ys = [lv + offset for lv in self._prior.points.values()]
        return xs + list(self._opt.Xi), ys + list(self._opt.yi)

    @property
    def fitted_points(self) -> int:
        """How many points the GP was fitted on last (the prior's configurations in use, then this session's
        successful probes); 0 before the first fit."""
        return len(self._fitted_y)

    def use_fit(self, model: Any, fitted_y: Sequence[float]) -> None:
        """Make ``model`` — a scikit-learn GP regressor fitted on ``fitted_y`` (log times) at configurations in
        skopt's transformed space — the posterior every prediction is read from; predictions remembered for the
        previous fit are forgotten. ``fit`` ends here; an override of ``fit`` hands its own model over here."""
        self._model = model
        self._fitted_y = list(fitted_y)
        self._predictions = {}

    def fit(self) -> None:
        """Fit the GP on the training set with skopt's estimator (cloned, as skopt's ``tell()`` did). Up to
        ``FULL_FIT_POINTS`` points: skopt's hyperparameter search, restarts and all. Above: the last fit's
        hyperparameters, searched again — from there, without restarts — only once the set has grown by
        ``REFIT_GROWTH``; a first fit that large searches once, from skopt's starting values."""
        from sklearn.base import clone

        xs, ys = self._training_set()
        est = clone(self._opt.base_estimator_)
        n = len(ys)
        if n > self.full_fit_points:
            search = self._model is None or n >= (1 + REFIT_GROWTH) * self._searched_at
            est.set_params(n_restarts_optimizer=0)
            if self._model is not None:
                est.set_params(kernel=self._carried_kernel(), optimizer="fmin_l_bfgs_b" if search else None)
            if search:
                self._searched_at = n
        else:
            self._searched_at = n
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(self._opt.space.transform(xs), ys)
        self.use_fit(est, ys)

    def _carried_kernel(self) -> Any:
        """The last fit's kernel with its fitted hyperparameters, the white noise put back (skopt zeroes it in
        ``kernel_`` after a fit and keeps it as ``noise_``)."""
        from sklearn.base import clone
        from sklearn.gaussian_process.kernels import Sum, WhiteKernel

        kernel = clone(self._model.kernel_)
        if isinstance(kernel, Sum) and isinstance(kernel.k2, WhiteKernel) and self._model.noise_ is not None:
            white = kernel.k2
            low, high = white.noise_level_bounds
            kernel.set_params(k2=type(white)(noise_level=float(np.clip(self._model.noise_, low, high)),
                                             noise_level_bounds=white.noise_level_bounds))
        return kernel

    def _difference_sd(self, a: Mapping[str, int], b: Mapping[str, int]) -> float:
        """The posterior standard deviation of log(time at a) − log(time at b): how sure the model is of the
        difference between two configurations (their covariance counted), not of each one alone."""
        if self._model is None:
            return 0.0
        xs = self._opt.space.transform([self._z(a), self._z(b)])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _, cov = self._model.predict(xs, return_cov=True)
        return float(np.sqrt(max(cov[0, 0] + cov[1, 1] - 2 * cov[0, 1], 0.0)))

    def _noise_sd(self, model: Any = None) -> float:
        """The white noise of one reading, as ``model`` (the fitted GP) has it: a standard deviation of log(time)."""
        model = self._model if model is None else model
        return math.sqrt(max(float(model.noise_ or 0.0), 0.0)) * float(model.y_train_std_)

    def _with_noise(self, noise_sd: float) -> Any:
        """The fitted GP, or — where its own noise is below ``noise_sd`` (a standard deviation of log(time)
        measured since, by the confirmation's repeated readings) — the GP refitted on the same set with its
        white noise fixed there, the kernel's other hyperparameters searched again. With single readings a fit
        can take every reading for the truth (one on the sandbox put the noise at 0.1 % where the confirmation
        read 11–16 %); the ranges read from it would be that sure too."""
        from sklearn.base import clone

        model = self._model
        if noise_sd <= self._noise_sd(model):
            return model
        xs, ys = self._training_set()
        est = clone(self._opt.base_estimator_)
        est.set_params(noise=(noise_sd / float(model.y_train_std_)) ** 2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(self._opt.space.transform(xs), ys)
        return est

    def _differences(self, configs: Sequence[Mapping[str, int]], ref: Mapping[str, int],
                     model: Any = None) -> tuple[Any, Any]:
        """Posterior mean and standard deviation of log(time at c) − log(time at ``ref``) for each of ``configs``
        (arrays): ``_difference_sd`` for many configurations at once, in one pass over the fitted set. The
        model's own noise term is not in it — the difference is between the true times, not two readings.
        ``model``: another fit of the same set (``_with_noise``); the fitted GP by default."""
        model = self._model if model is None else model
        xs = self._opt.space.transform([self._z(c) for c in configs])
        xr = self._opt.space.transform([self._z(ref)])
        k_x, k_r = model.kernel_(xs, model.X_train_), model.kernel_(xr, model.X_train_)[0]
        a = k_x @ model.K_inv_
        var_x = model.kernel_.diag(xs) - np.einsum("ij,ij->i", a, k_x)
        var_r = float(model.kernel_.diag(xr)[0] - k_r @ model.K_inv_ @ k_r)
        cov = model.kernel_(xs, xr)[:, 0] - a @ k_r
        scale = model.y_train_std_
        mean = scale * ((k_x - k_r) @ model.alpha_)
        return mean, np.sqrt(np.maximum(var_x + var_r - 2 * cov, 0.0)) * scale

    def predict(self, configs: Sequence[Mapping[str, int]]) -> list[float] | None:
        """Posterior mean of log(time) at ``configs``, or None before the model has been fitted."""
        if self._model is None:
            return None
        return [float(v) for v in self._posterior(configs, std=False)]

    def _posterior(self, configs: Sequence[Mapping[str, int]], *, std: bool) -> Any:
        """The fitted GP's prediction at ``configs`` (mean, or mean and standard deviation), remembered until
        the next fit: one probe's rules ask for the same configurations many times over."""
        return self._posterior_at(tuple(key_of(c, self.dimensions) for c in configs), std=std)

    def _posterior_at(self, keys: tuple[tuple[int, ...], ...], *, std: bool) -> Any:
        """``_posterior`` at configurations given as keys (``space.key_of``)."""
        if self.remember_predictions and (std, keys) in self._predictions:
            return self._predictions[(std, keys)]
        xs = self._opt.space.transform([[d.to_z(v) for d, v in zip(self.dimensions, k)] for k in keys])
        if len(self._fitted_y) <= self.full_fit_points:
            out = self._model.predict(xs, return_std=std)  # skopt's own arithmetic: cold searches unchanged
        else:
            if ("K", keys) not in self._predictions:  # the kernel to the fitted set, for the mean and the spread
                self._predictions[("K", keys)] = self._model.kernel_(xs, self._model.X_train_)
            out = self._large_prediction(xs, std, self._predictions[("K", keys)])
        if self.remember_predictions:
            self._predictions[(std, keys)] = out
        return out

    def _large_prediction(self, xs: Any, std: bool, k_trans: Any = None) -> Any:
        """skopt's predictive mean (and spread) at transformed points ``xs``, the spread's quadratic form as one
        matrix product: skopt's three-operand ``einsum`` does not use BLAS, and at 4096 candidates and 170
        fitted points it took most of a probe's time."""
        model = self._model
        k_trans = model.kernel_(xs, model.X_train_) if k_trans is None else k_trans
        mean = model.y_train_std_ * (k_trans @ model.alpha_) + model.y_train_mean_
        if not std:
            return mean
        var = model.kernel_.diag(xs) - np.einsum("ij,ij->i", k_trans @ model.K_inv_, k_trans)
        return mean, np.sqrt(np.maximum(var, 0.0) * model.y_train_std_**2)

    def _acquisition_model(self) -> Any:
        """What skopt's acquisition function predicts with: the GP itself, or above ``FULL_FIT_POINTS`` the
        same GP through ``_large_prediction``."""
        if len(self._fitted_y) <= self.full_fit_points:
            return self._model
        owner = self

        class _Large:
            def predict(self, xs: Any, return_std: bool = False) -> Any:
                return owner._large_prediction(np.asarray(xs), return_std)

        return _Large()

    def _expected_improvement(self, configs: Sequence[Mapping[str, int]]) -> np.ndarray:
        mu, sd = self._posterior(configs, std=True)
        # The bar: the best prediction at a configuration with data — this session's probes and the prior's.
        observed = self.predict([c for c, _ in self.history.ok] + self._prior_configs())
        assert observed is not None
        best = min(observed)
        from scipy.stats import norm

        sd = np.maximum(sd, 1e-9)
        z = (best - mu) / sd
        return (best - mu) * norm.cdf(z) + sd * norm.pdf(z)
