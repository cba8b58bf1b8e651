"""The daemon's Prometheus metrics, in a registry of its own (nothing from other libraries leaks in).

Per target (label ``target``, the daemon's name for it) and, for recommendations, per knob and object (a device,
a tablespace, or "" for the whole server). Gauges of recommendations are rebuilt from the store after every
session, re-validation and reload, so a withdrawn recommendation disappears from /metrics.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, disable_created_metrics, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

REC_LABELS = ("target", "knob", "object")
RUN_KINDS = ("session", "reprobe", "revalidate")  # tuner.daemon.session_request.SessionRequest.kind


class Metrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        disable_created_metrics()  # the *_created series say when this process made a counter: noise here
        self.registry = r = CollectorRegistry(auto_describe=True)
        self.recommended = Gauge("tuner_recommended_setting",
                                 "Recommended value of a setting (numeric settings; accepted recommendations only)",
                                 REC_LABELS, registry=r)
        self.improvement = Gauge("tuner_improvement_ratio",
                                 "Measured improvement of the recommendation over the baseline (1.25 = 25 % faster)",
                                 REC_LABELS, registry=r)
        self.ci_low = Gauge("tuner_ci95_low", "Lower end of the improvement's 95 % confidence interval", REC_LABELS,
                            registry=r)
        self.ci_high = Gauge("tuner_ci95_high", "Upper end of the improvement's 95 % confidence interval",
                             REC_LABELS, registry=r)
        self.last_session = Gauge("tuner_last_session_timestamp_seconds",
                                  "Unix time at which the target's last stored session started", ["target"],
                                  registry=r)
        self.drift_events = Counter("tuner_drift_events", "Drift events detected by this process", ["target"],
                                    registry=r)
        self.probes = Counter("tuner_probes", "Probes (search and confirmation trials) run by this process",
                              ["target"], registry=r)
        self.running = Gauge("tuner_session_running", "1 while a session or re-validation runs on the target",
                             ["target"], registry=r)
        self.reload_ok = Gauge("tuner_config_last_reload_successful",
                               "1 if the last configuration (re)load succeeded, else 0 (the old one stays in force)",
                               registry=r)
        self.reload_ok.set(1)
        self.restore_ok = Gauge("tuner_last_restore_successful",
                                "1 if the last restore from the journal (at start, after each run) put everything "
                                "back, else 0: something tuner changed is still changed (see /readyz)", registry=r)
        self.restore_ok.set(1)
        self.in_force = Gauge("tuner_setting_in_force",
                              "Value the target server runs with now, as the last drift check read it (numeric "
                              "settings tuner tunes; compare with tuner_recommended_setting)", REC_LABELS, registry=r)
        self.runs = Counter("tuner_runs", "Daemon runs ended, by kind and status", ["target", "kind", "status"],
                            registry=r)

    def target(self, name: str) -> None:
        """Make the target's series exist (0) before anything happened on it."""
        self.drift_events.labels(name)
        self.probes.labels(name)
        self.running.labels(name).set(0)
        # The failures at 0 too: an alert on increase() misses a series whose first sample is already 1.
        for kind in RUN_KINDS:
            for status in ("failed", "interrupted"):
                self.runs.labels(name, kind, status)

    def forget_target(self, name: str) -> None:
        for metric in (self.drift_events, self.probes, self.running, self.last_session):
            try:
                metric.remove(name)
            except KeyError:
                pass
        self.set_recommendations(name, ())
        self.set_in_force(name, {})
        for labels in [k for k in _label_sets(self.runs) if k[0] == name]:
            self.runs.remove(*labels)

    def set_recommendations(self, target: str, recs: Iterable[Any]) -> None:
        """Replace the target's recommendation gauges with ``recs`` (:class:`tuner.report.model.Recommendation`)."""
        for gauge in (self.recommended, self.improvement, self.ci_low, self.ci_high):
            for labels in [k for k in _label_sets(gauge) if k[0] == target]:
                gauge.remove(*labels)
        for r in recs:
            labels = (target, r.knob, r.object or "")
            if isinstance(r.recommended, int) and not isinstance(r.recommended, bool):
                self.recommended.labels(*labels).set(r.recommended)
            if r.effect is not None:
                self.improvement.labels(*labels).set(r.effect.improvement)
                self.ci_low.labels(*labels).set(r.effect.ci95[0])
                self.ci_high.labels(*labels).set(r.effect.ci95[1])

    def set_in_force(self, target: str, values: Mapping[tuple[str, str | None], Any]) -> None:
        """Replace the target's ``tuner_setting_in_force`` series with ``values`` ((knob, object) -> the server's
        value now, :func:`tuner.daemon.drift.server_values`); text values (wal_compression's) have no gauge."""
        for labels in [k for k in _label_sets(self.in_force) if k[0] == target]:
            self.in_force.remove(*labels)
        for (knob, obj), value in values.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                self.in_force.labels(target, knob, obj or "").set(value)

    def render(self) -> bytes:
        return generate_latest(self.registry)


def _label_sets(gauge: Gauge | Counter) -> list[tuple[str, ...]]:
    # prometheus_client keeps a metric's children by label values; there is no public listing of them.
    return list(getattr(gauge, "_metrics", {}).keys())
