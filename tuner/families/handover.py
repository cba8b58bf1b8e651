"""What one family of a session hands a later one (issue #53: a knob has one owner): a knob another family
searched and confirmed in a combination becomes its owner's recommendation (:func:`from_finding`), and the owner
probes at the values settled before it (:class:`Fixed`), never at today's."""

from __future__ import annotations

from typing import Any, Literal

from tuner.core import bounds
from tuner.core.decide import recommendation
from tuner.core.loops import Probe
from tuner.families.base import Finding
from tuner.report.model import Recommendation, Trial


def from_finding(finding: Finding, facts: Any) -> Recommendation:
    """The owner's recommendation of a knob another family searched and confirmed in a combination
    (:class:`tuner.families.base.Finding`): its own share's decision, and the combination it belongs to."""
    spec = bounds.spec(finding.knob, facts)
    assert spec is not None
    source = facts.settings[finding.knob].source if finding.knob in facts.settings else "default"
    rec = recommendation(finding.knob, finding.decided, source=source, requires=spec.requires)
    rule = f"; {finding.note}" if finding.note else ""
    return rec.model_copy(update={
        "reason": f"searched and confirmed with {finding.where} by the {finding.by} family: {rec.reason}{rule}",
        "together_with": list(finding.together_with) if rec.decision == "change" else []})


def settled_value(rec: Recommendation) -> Any:
    """The value a recommendation leaves the knob at: the recommended value where it changes, else today's."""
    return rec.recommended if rec.decision == "change" else rec.current


class Fixed:
    """A probe at ``fixed`` values with the searched knobs on top (the trials carry all of them)."""

    def __init__(self, probe: Probe, fixed: dict[str, Any]) -> None:
        self.probe, self.fixed = probe, dict(fixed)

    async def __call__(self, config: dict[str, int], *, phase: Literal["search", "confirm"] = "search",
                       arm: Literal["baseline", "candidate"] | None = None) -> Trial:
        return await self.probe({**self.fixed, **config}, phase=phase, arm=arm)
