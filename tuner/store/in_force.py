"""What is in force on a target, decided from its whole stored history — never from a window of recent sessions: a
recommendation applied long ago stays in force through any number of later sessions that kept it, and a config
management pull must not read "keep what you have" as "remove it" (issue 44: after 200 sessions it vanished).

Pure: it works on the ``recommendations`` rows (a few columns each, no report JSON), newest session first."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Decided:
    """One stored recommendation row, as ``in_force`` needs it."""

    session_id: str
    seq: int  # its index in the session's report.recommendations
    knob: str
    object: str | None
    decision: str
    current: str  # as stored: str() of the value
    recommended: str
    kind: str = "recommend"  # the session's: "recommend", "scheduled", "drift", "revalidate", ...


def in_force(rows: Iterable[Decided]) -> list[Decided]:
    """The rows in force, in the order of ``rows`` (newest session first, then ``seq``). Per knob and object the
    latest decision rules: "change" puts its recommendation in force; "keep" withdraws an earlier one (a
    re-validation whose interval no longer clears the minimum effect, a new session that found today's value as
    good) — unless what it kept *is* that earlier recommendation (it was applied, and a later session found nothing
    better than it), or, outside a re-validation, the value it confirmed was that recommendation again: the
    session found the accepted value inside its near-optimal range (the plateau rule chose it, or its search did)
    and its confirmation against today's could not tell them apart this time. An accepted value is replaced only
    by a session that finds it outside its near-optimal range (issue #53); withdrawing one that no longer earns its
    change is what re-validation is for."""
    history: dict[tuple[str, str | None], list[Decided]] = {}
    for r in rows:
        history.setdefault((r.knob, r.object), []).append(r)
    out: list[Decided] = []
    for decided in history.values():
        latest = decided[0]
        if latest.decision == "change":
            out.append(latest)
            continue
        earlier = next((r for r in decided[1:] if r.decision == "change"), None)
        if earlier is None:
            continue
        found_again = latest.kind != "revalidate" and latest.recommended == earlier.recommended
        if earlier.recommended == latest.current or found_again:
            out.append(earlier)
    return out
