"""The report's data arranged for the HTML report's figures: the paired confirmations (as the sequential test
formed them), the searches they belong to, the recommendations attached to both, and how each trial is drawn.

The minimum effect is the report's own field. Reports written before it was carried state it only in the reasons
that come with an effect ("... the minimum effect 1.05x"), and for those it is read from there (1.05, the shipped
policies' value, when no reason says).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tuner.emit.svg import as_value, esc, finite, num
from tuner.report.model import Recommendation, Report, Trial

DEFAULT_MIN_EFFECT = 1.05
_MIN_EFFECT = re.compile(r"minimum effect (\d{1,3}(?:\.\d{1,6})?)x")


HistoryEntry = tuple[str, str, dict[str, Any]]  # (session id, started_at, one decision as the store lists it)


def by_knob(sessions: Iterable[tuple[str, str, Sequence[Any]]]) -> dict[tuple[str, str | None], list[HistoryEntry]]:
    """Sessions' decisions (session id, started_at, decisions as :class:`tuner.store.SessionSummary` carries them)
    per knob and object, each list oldest first: what :func:`tuner.emit.figures.history_figure` draws."""
    out: dict[tuple[str, str | None], list[HistoryEntry]] = {}
    for sid, started, decisions in sorted(sessions, key=lambda s: s[1]):
        for d in decisions:
            if isinstance(d, dict) and d.get("knob"):
                out.setdefault((str(d["knob"]), d.get("object")), []).append((sid, started, d))
    return out


def knob_label(r: Recommendation) -> str:
    return f"{r.knob} ({r.object})" if r.object else r.knob


def min_effect(report: Report) -> tuple[float, bool]:
    """The policy's minimum effect, and whether the report states it (else the shipped default)."""
    if report.min_effect is not None:
        return report.min_effect, True
    # Only for reports written before Report carried min_effect: recover it from the reasons' prose.
    return _stated_in_reasons(report)


def _stated_in_reasons(report: Report) -> tuple[float, bool]:
    """The minimum effect as an old report's reasons state it, and whether one did (else the shipped default)."""
    for r in report.recommendations:
        m = _MIN_EFFECT.search(r.reason)
        if m and 1.0 <= float(m.group(1)) <= 100:
            return float(m.group(1)), True
    return DEFAULT_MIN_EFFECT, False


@dataclass
class Confirmation:
    """A run of paired confirmation trials of one baseline against one candidate, in the order they ran."""

    family: str | None
    object: str | None
    baseline: dict[str, int | str] | None = None
    candidate: dict[str, int | str] | None = None
    trials: list[Trial] = field(default_factory=list)
    pairs: list[tuple[Trial, Trial]] = field(default_factory=list)  # (baseline, candidate)
    slots: list[int] = field(default_factory=list)  # per trial: the pair it belongs to (or would have)
    recs: list[Recommendation] = field(default_factory=list)

    def accepts(self, t: Trial) -> bool:
        if (t.family, t.object) != (self.family, self.object):
            return False
        mine = self.baseline if t.arm == "baseline" else self.candidate
        return mine is None or mine == t.config

    def add(self, t: Trial) -> None:
        if t.arm == "baseline" and self.baseline is None:
            self.baseline = dict(t.config)
        elif t.arm == "candidate" and self.candidate is None:
            self.candidate = dict(t.config)
        self.trials.append(t)

    @property
    def changed(self) -> list[str]:
        b, c = self.baseline or {}, self.candidate or {}
        return [k for k in c if k in b and str(b[k]) != str(c[k])]

    def pair_up(self) -> None:
        """Pairs as the sequential test formed them: the successful trials in blocks of four (ABBA, BAAB),
        paired (1st, 2nd) and (3rd, 4th); a failed probe was retried, so it does not shift the blocks."""
        ok = [t for t in self.trials if t.status == "ok" and finite(t.value) is not None]
        for i in range(0, len(ok) - 3, 4):
            for x, y in ((ok[i], ok[i + 1]), (ok[i + 2], ok[i + 3])):
                if {x.arm, y.arm} == {"baseline", "candidate"}:
                    self.pairs.append((x, y) if x.arm == "baseline" else (y, x))
        seen = 0
        for t in self.trials:
            self.slots.append(seen // 2)
            if t.status == "ok" and finite(t.value) is not None:
                seen += 1

    @property
    def ratios(self) -> list[float]:
        return [b.value / c.value for b, c in self.pairs if b.value and c.value]  # type: ignore[operator]

    @property
    def improvement(self) -> float | None:
        rs = [r for r in self.ratios if r > 0]
        return math.exp(sum(map(math.log, rs)) / len(rs)) if rs else None


def confirmations(trials: Sequence[Trial]) -> list[Confirmation]:
    out: list[Confirmation] = []
    cur: Confirmation | None = None
    for t in trials:
        if t.phase != "confirm" or t.arm is None:
            cur = None
            continue
        if cur is None or not cur.accepts(t):
            cur = Confirmation(t.family, t.object)
            out.append(cur)
        cur.add(t)
    for c in out:
        c.pair_up()
    return out


def attach(recs: Sequence[Recommendation], confs: Sequence[Confirmation]) -> None:
    """Each recommendation with an effect to the confirmation whose pairs give that effect (the same number of
    pairs, the same geometric mean); one without an effect to a confirmation of its knob that reached none."""
    for r in recs:
        e = r.effect
        for c in confs:
            if c.candidate is None or str(c.candidate.get(r.knob)) != str(r.recommended):
                continue
            if e is not None:
                imp = c.improvement
                if len(c.pairs) == e.n_pairs and imp is not None and abs(imp - e.improvement) <= 1e-3 * e.improvement + 5e-4:
                    c.recs.append(r)
                    break
            elif r.knob in c.changed and not any(x.effect for x in c.recs) and c.improvement is None:
                c.recs.append(r)
                break


@dataclass
class Search:
    """The search probes of one family on one object over one set of knobs, with the confirmations and
    recommendations of those knobs."""

    family: str | None
    object: str | None
    keys: list[str]
    trials: list[Trial] = field(default_factory=list)
    confirmations: list[Confirmation] = field(default_factory=list)
    recs: list[Recommendation] = field(default_factory=list)

    @property
    def knobs(self) -> list[str]:
        varying = [k for k in self.keys if len({str(t.config.get(k)) for t in self.trials}) > 1]
        return varying or self.keys[:1]

    def today(self, knob: str) -> int | str | None:
        for r in self.recs:
            if r.knob == knob:
                return as_value(r.current)
        for c in self.confirmations:
            if c.baseline and knob in c.baseline:
                return as_value(c.baseline[knob])
        return None

    def rec(self, knob: str) -> Recommendation | None:
        return next((r for r in self.recs if r.knob == knob), None)

    def candidate(self, knob: str) -> int | str | None:
        r = self.rec(knob)
        if r is not None:
            return as_value(r.recommended)
        for c in self.confirmations:
            if c.candidate and knob in c.candidate:
                return as_value(c.candidate[knob])
        return None


def searches(report: Report, confs: Sequence[Confirmation]) -> list[Search]:
    groups: dict[tuple[Any, ...], Search] = {}
    for t in report.trials:
        if t.phase != "search":
            continue
        key = (t.family, t.object, tuple(sorted(t.config)))
        if key not in groups:
            groups[key] = Search(t.family, t.object, list(t.config))
        groups[key].trials.append(t)
    out = list(groups.values())
    roles = {k: v for section in report.sections.values() for k, v in section.trial_objects().items()}
    for c in confs:
        for g in out:
            if (c.family, c.object) == (g.family, g.object) and c.changed and set(c.changed) <= set(g.keys):
                g.confirmations.append(c)
                break
    for r in report.recommendations:
        for g in out:
            if r.knob not in g.knobs:
                continue
            if any(r in c.recs for c in g.confirmations) or _same_place(r, g, roles):
                g.recs.append(r)
                break
    return out


def _same_place(r: Recommendation, g: Search, roles: dict[str, str]) -> bool:
    if r.scope == "device":
        return r.object is not None and roles.get(r.object) == g.object
    if r.scope == "tablespace":
        return g.object is not None and r.object is not None and r.object in g.object
    return g.object is None



def point_title(t: Trial, knobs: Sequence[str], unit: str) -> str:
    cfg = ", ".join(f"{k} = {t.config.get(k)}" for k in knobs)
    what = f"{t.phase}" + (f", {t.arm}" if t.arm else "")
    if t.status == "ok" and finite(t.value) is not None:
        return esc(f"{cfg}: {num(t.value)} {unit.split(' (')[0]} ({what})")
    return esc(f"{cfg}: {t.status} ({what})" + (f": {t.reason}" if t.reason else ""))


def point_kind(t: Trial) -> str:
    if t.status != "ok" or finite(t.value) is None:
        return "rejected" if t.status == "rejected" else "failed"
    return "search" if t.phase == "search" else (t.arm or "candidate")


def point_data(t: Trial) -> dict[str, str]:
    return {"phase": t.phase, "status": t.status, "arm": t.arm or ""}
