"""A knob's search space and today's value: the policy's range ∩ the catalogue's range for the server's version
∩ the range the server itself reports (``pg_settings.min_val`` / ``max_val``). One place, so that every family
treats "no maximum" and "this build cannot vary it" the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.knobs import catalog
from tuner.knobs.catalog import KnobSpec
from tuner.optimiser import Dimension
from tuner.settings.policy import Policy
from tuner.target.facts import TargetFacts


@dataclass(frozen=True)
class Today:
    """A knob's value in force on the target and where it comes from (``pg_settings.source``)."""

    value: int | str
    source: str


def spec(knob: str, facts: TargetFacts) -> KnobSpec | None:
    """The catalogue's facts for ``knob`` on this server's version (None: the server has no such knob)."""
    return catalog.load().spec(knob, facts.server_version_num)


def today(knob: str, facts: TargetFacts) -> Today:
    """Today's value: the server's setting, else the catalogue's default for its version (clamped into range)."""
    setting = facts.settings.get(knob)
    ks = spec(knob, facts)
    if setting is not None:
        if setting.vartype == "integer" and setting.setting.lstrip("-").isdigit():
            value = int(setting.setting)
            return Today(ks.clamp(value) if ks is not None else value, setting.source)
        return Today(setting.setting, setting.source)
    if ks is None:
        raise KeyError(f"{knob}: neither the server nor the catalogue knows it")
    return Today(ks.default, "default")


def dimension(knob: str, policy: Policy, facts: TargetFacts, *, quantum: int = 1) -> Dimension | str:
    """The :class:`Dimension` to search ``knob`` over, or the reason it cannot be searched on this server."""
    wanted = policy.search.get(knob)
    if wanted is None:
        return f"the policy does not search {knob}"
    ks = spec(knob, facts)
    if ks is None:
        return f"PostgreSQL {facts.server_version} has no {knob}"
    # The knob's own limits on this server: the catalogue's for its version, and the server's min_val/max_val.
    own_low, own_high = ks.min, ks.max
    setting = facts.settings.get(knob)
    if setting is not None and setting.vartype == "integer":
        if setting.min_val is not None:
            own_low = int(setting.min_val) if own_low is None else max(own_low, int(setting.min_val))
        if setting.max_val is not None:
            own_high = int(setting.max_val) if own_high is None else min(own_high, int(setting.max_val))
    low = wanted.min if own_low is None else max(wanted.min, own_low)
    high = wanted.max if own_high is None else min(wanted.max, own_high)
    if high <= low:
        # effective_io_concurrency and its siblings are fixed at 0 where the platform lacks posix_fadvise
        # (https://www.postgresql.org/docs/current/runtime-config-resource.html#GUC-EFFECTIVE-IO-CONCURRENCY).
        hint = " (a build without prefetch support)" if high == 0 and knob.endswith("_io_concurrency") else ""
        return f"this server allows {knob} only in {low}..{high}{hint}: nothing to search"
    return Dimension(knob, low, high, wanted.scale, quantum=quantum, limits=(low == own_low, high == own_high))
