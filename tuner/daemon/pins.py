"""Which family a stored recommendation belongs to, and whether it can be re-validated by pinning it: asked of the
families (their ``honours_pins`` and ``object_scopes``) and of the knob catalogue, never guessed from names."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tuner.daemon.drift import knob_families
from tuner.families import REGISTRY
from tuner.families.base import Pin
from tuner.report.model import Recommendation
from tuner.target.fingerprint import recommendation_key


@dataclass(frozen=True)
class Owners:
    knobs: Mapping[str, str]  # knob -> family, as the catalogue says (server-wide settings)
    scopes: Mapping[str, str]  # object scope ("device", "tablespace") -> the family whose recommendations name one
    pinned: frozenset[str]  # the families that re-validate a pinned recommendation

    def family(self, r: Recommendation) -> str:
        if r.object is not None and r.scope in self.scopes:
            return self.scopes[r.scope]
        return self.knobs.get(r.knob, "")

    def pinnable(self, r: Recommendation) -> bool:
        """Whether ``r`` can be re-validated by a pin: a server-wide number of a family that honours pins."""
        return (r.scope == "system" and self.family(r) in self.pinned
                and isinstance(r.recommended, int) and isinstance(r.current, int))

    def of_key(self, key: str, accepted: Iterable[tuple[str, Recommendation]]) -> str:
        """The family of the accepted recommendation whose :func:`recommendation_key` is ``key``."""
        r = next((r for _, r in accepted if recommendation_key(r.knob, r.object) == key), None)
        return self.family(r) if r is not None else self.knobs.get(key, "")


def owners() -> Owners:
    """The registered families' declarations. It imports every family module, and with them the optimiser stack:
    call it in a thread, not on the event loop."""
    families = [REGISTRY.get(name) for name in REGISTRY.names()]
    return Owners(knobs=knob_families(), scopes={s: f.name for f in families for s in f.object_scopes},
                  pinned=frozenset(f.name for f in families if f.honours_pins))


def pins(accepted: Iterable[tuple[str, Recommendation]], owners: Owners, knobs: Iterable[str]) -> dict[str, Pin]:
    """Per family, the accepted recommendations that can be re-validated by pinning them (only ``knobs``, if any)."""
    wanted = set(knobs)
    grouped: dict[str, dict[str, Any]] = {}
    for sid, r in accepted:
        if not owners.pinnable(r) or (wanted and r.knob not in wanted):
            continue
        g = grouped.setdefault(owners.family(r), {"sid": sid, "cand": {}, "base": {}, "near": {}})
        g["cand"][r.knob], g["base"][r.knob] = r.recommended, r.current
        if r.near_optimal:
            g["near"][r.knob] = tuple(r.near_optimal)
    return {fam: Pin(g["sid"], g["cand"], g["base"], g["near"]) for fam, g in grouped.items()}


def recommended(accepted: Iterable[tuple[str, Recommendation]]) -> dict[str, Any]:
    """Accepted recommendations keyed as :func:`tuner.daemon.drift.action` wants them."""
    return {recommendation_key(r.knob, r.object): r.recommended for _, r in accepted}
