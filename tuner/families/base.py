"""What a knob family is, what it is given, and what it returns — the seam the orchestrator, the daemon and
new families plug into.

A family declares what it needs from the target (``Needs``) and which families must run before it
(``after``); the orchestrator checks the needs, orders the families and hands each one a
:class:`FamilyContext`. A family returns one :class:`FamilyResult`: its outcome, its trials, its
recommendations as data, and a report section of its own. Adding a family is one module with a class that
subclasses :class:`Family` (its hooks have defaults), plus one line in :data:`tuner.families.REGISTRY`.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import asyncpg
from pydantic import BaseModel

from tuner.core.decide import Decision
from tuner.log import get_logger
from tuner.report.model import FamilyOutcome, Recommendation, Report, ReportSection, Trial
from tuner.report.preflight import FamilyPlan
from tuner.store import StoredPrior, Store, StoreError
from tuner.target.guard import Guard
from tuner.target.server import Restart

if TYPE_CHECKING:
    from tuner.actuate import Journal
    from tuner.probes.statements import Selection
    from tuner.settings.config import Config, Section
    from tuner.core.progress import Progress
    from tuner.emit.svg import Figures
    from tuner.settings.policy import Policy
    from tuner.probes.diskstat import DiskReader
    from tuner.target.facts import TargetFacts

log = get_logger("tuner.families")


@dataclass(frozen=True)
class Needs:
    """What a family needs from the target before it can run at all."""

    local_host: bool = False  # tuner runs on the staging host (it reads the data directory, writes sysfs)
    writable: bool = False  # a writable clone marked staging (the sandbox's own primary): the family writes
    superuser: bool = False  # on the server it probes


@dataclass(frozen=True)
class Endpoint:
    """A server a family may probe: how to reach it, restart it, and what it is."""

    dsn: str | None
    restart: Restart | None  # None: cannot be restarted, or the policy does not allow restarts; checks the guard
    facts: TargetFacts
    refusal: str | None = None  # why families that need this endpoint cannot use it
    guard: Guard | None = None  # None only with a refusal

    async def check(self) -> None:
        """Check the server is still what the interlock cleared (one connection, opened and closed)."""
        if self.guard is None:
            raise RuntimeError(f"no cleared connection to {self.dsn}: {self.refusal}")
        await self.guard.check()

    async def connect(self, **kw: Any) -> asyncpg.Connection:
        """A connection checked by the interlock (see :class:`tuner.target.guard.Guard`)."""
        if self.guard is None:
            raise RuntimeError(f"no cleared connection to {self.dsn}: {self.refusal}")
        return await self.guard.connect(**kw)


@dataclass
class FamilyContext:
    """Everything a family may use: one per session, shared by every family."""

    cfg: Config
    policy: Policy
    target: Endpoint  # the server probed read-only: a hot standby or a marked clone
    writable: Endpoint | None  # where families that write probe (None: nothing asked for one)
    journal: Journal
    progress: Progress
    budget: int | None  # optimisation probes per search (None: the policy's)
    sandbox: bool = False
    own_devices: frozenset[str] = frozenset()  # block devices that are tuner's own (a sandbox's loop device)
    sandbox_dir: str | None = None
    # Earlier sessions on a matching target (a warm start): None when there is no store, or warm starts are off.
    history: WarmStart | None = None
    # Per family, a stored recommendation to re-validate instead of searching (the daemon's re-validation).
    pins: dict[str, Pin] = field(default_factory=dict)
    # The data directory's block device, whose counters a cold probe reads around its scans (None: not on this
    # host, or no block device): the report's I/O regime is computed from them.
    disk: DiskReader | None = None
    # The recommendations in force on this target (the store's accepted set), by recommendation key (``knob``, or
    # ``knob:object``): the plateau rule keeps one that a search cannot tell apart from its best.
    accepted: dict[str, Any] = field(default_factory=dict)
    # What earlier families of this session found for knobs they probed but do not own, by knob: the owner
    # recommends from it (a knob has one owner: the catalogue's family).
    findings: dict[str, Finding] = field(default_factory=dict)
    # [workload] from = "pg_stat_statements": the statements every read-path family replays and those left out,
    # chosen once, by the first family that plans (families.plans.read_path_queries), so all probe one workload.
    selection: Selection | None = None

    @property
    def facts(self) -> TargetFacts:
        return self.target.facts

    @asynccontextmanager
    async def connection(self, endpoint: Endpoint | None = None) -> AsyncIterator[asyncpg.Connection]:
        """A fresh connection to ``endpoint`` (default: the target), checked by the interlock, closed when the
        block ends."""
        conn = await (endpoint or self.target).connect()
        try:
            yield conn
        finally:
            await conn.close()


@dataclass(frozen=True)
class Finding:
    """A knob probed by a family that does not own it, handed on to its owner as data: the combination it was
    searched and confirmed in, and its own share of that combination's effect (``decided``: the combination with
    this knob put back to today's value, against the combination, in paired trials)."""

    knob: str
    by: str  # the family that probed it
    decided: Decision  # current: the combination with this knob at today's value; candidate: the combination
    combination: Decision  # today's combination against the one recommended
    where: str  # what the combination also set, for the reason ("read_ahead_kb = 2048 on /dev/loop0")
    together_with: tuple[str, ...] = ()  # the other knobs of the combination that change with it
    note: str | None = None  # the plateau rule's sentence, where the rule chose this knob's value


@dataclass(frozen=True)
class Pin:
    """A stored recommendation to re-validate: no search, only the paired confirmation of ``candidate`` against
    today's values — or, where today's value already is the recommendation (it was applied), against ``baseline``,
    the values it was recommended over. Knobs are keyed as in a trial's config."""

    session_id: str  # the session that made the recommendation
    candidate: dict[str, int]
    baseline: dict[str, int]
    near_optimal: dict[str, tuple[int, int]] = field(default_factory=dict)

    def against(self, today: dict[str, int]) -> tuple[dict[str, int], dict[str, int]]:
        """(current, candidate) for the confirmation, over ``today``'s knobs."""
        candidate = {k: self.candidate.get(k, v) for k, v in today.items()}
        if candidate != today:
            return dict(today), candidate
        return {k: self.baseline.get(k, v) for k, v in today.items()}, candidate

    def note(self) -> str:
        return f"re-validation of session {self.session_id}'s recommendation: no search, paired trials only"


@dataclass(frozen=True)
class WarmStart:
    """Where a family finds the trials of the latest stored session on a matching target."""

    store: Store
    fingerprint: dict[str, Any]
    session_id: str

    async def prior(self, family: str) -> StoredPrior | None:
        try:
            return await self.store.priors.find(self.fingerprint, family, exclude=self.session_id)
        except StoreError as exc:  # the history is a help, not a precondition: a cold start it is
            log.warning("warm_start.unavailable", family=family, reason=str(exc))
            return None


@dataclass
class FamilyResult:
    """One family's part of the report."""

    outcome: FamilyOutcome
    trials: list[Trial] = field(default_factory=list)
    recommendations: list[Recommendation] = field(default_factory=list)
    # The family's own part of the report: an instance of its ``report_section`` (None: it has nothing to add).
    section: ReportSection | None = None
    restored: list[str] = field(default_factory=list)  # what the family put back itself, as sentences


OBJECTIVE_UNIT = "ms (the workload's execution time)"


class Family(ABC):
    """A knob family: subclass it, set ``name``, ``needs`` and ``summary``, implement ``applicable`` and ``run``,
    and add one line to :data:`tuner.families.REGISTRY`. ``applicable`` is cheap and changes nothing; ``run``
    probes.

    Every other member is an optional hook with a default here, so shared code asks a family instead of guessing:
    a family overrides the ones that apply to it (an attribute, or a method with the same signature).
    """

    # Required: every family sets these.
    name: ClassVar[str]
    needs: ClassVar[Needs]
    summary: ClassVar[str]  # one line for --help
    after: ClassVar[tuple[str, ...]] = ()  # families that run before this one when both are chosen

    # Optional hooks, with the defaults shared code relies on.
    objective_unit: ClassVar[str] = OBJECTIVE_UNIT  # what a trial's value measures, for axes and captions
    honours_pins: ClassVar[bool] = False  # its run re-validates a stored recommendation given as a Pin
    # Its probes read the read path's one workload (the operator's queries or statements when given): a change of
    # the workload re-probes it; a family that runs a load of its own (WAL inserts, a replay) is left alone.
    reads_workload: ClassVar[bool] = False
    # The scopes of the objects its recommendations name ("device", "tablespace"), so that a recommendation on an
    # object is known to be its; none: its recommendations are server-wide settings, owned as the catalogue says.
    object_scopes: ClassVar[tuple[str, ...]] = ()
    # The model of its policy table ([NAME], read as ctx.policy.section(NAME)); None: it has none.
    policy_section: ClassVar[type[Section] | None] = None
    # The model of its part of the report (its fields are top-level keys of the JSON report; it renders itself in
    # the terminal table); None: it has none.
    report_section: ClassVar[type[ReportSection] | None] = None

    @abstractmethod
    def applicable(self, ctx: FamilyContext) -> str | None:
        """None when the family can run on this target, else the reason it cannot (one sentence)."""

    @abstractmethod
    async def run(self, ctx: FamilyContext) -> FamilyResult:
        """Probe, decide and return the family's part of the report (what it changed is put back)."""

    async def preflight(self, ctx: FamilyContext) -> FamilyPlan:
        """What ``tuner check`` shows of the family, which would run on this target — its workload, the checks
        only it makes, one probe's duration — found without changing anything (default: only that it runs)."""
        return FamilyPlan(family=self.name, runs=True, reason="runs (it shows nothing more before it probes)")

    def html_sections(self, report: Report, figures: Figures) -> list[tuple[str, str, str]]:
        """The HTML report's sections for what the family put in the report besides trials and recommendations,
        as (id, heading, body HTML); default none."""
        return []

    def upgrade_report(self, report: Report) -> Report:
        """``report``, written by an older tuner, as the family reads it today (e.g. trials it stored under another
        phase then); default: as it is."""
        return report


def objective_unit(family: Family | None) -> str:
    """What ``family``'s trial values measure, for axes and captions: its ``objective_unit``; for None (a family
    the registry does not know) the time of a workload (:data:`OBJECTIVE_UNIT`)."""
    return OBJECTIVE_UNIT if family is None else family.objective_unit


def unmet_needs(needs: Needs, ctx: FamilyContext) -> str | None:
    """The first of ``needs`` the context does not meet, as a sentence; None when all are met."""
    endpoint = ctx.writable if needs.writable else ctx.target
    if needs.writable and (endpoint is None or endpoint.refusal):
        return endpoint.refusal if endpoint is not None else "no writable staging server was prepared"
    assert endpoint is not None
    if needs.local_host and endpoint.facts.local_data_directory() is None:
        where = endpoint.facts.data_directory or "hidden from this role"
        return (f"tuner is not running on the staging host: the target's data directory ({where}) was not found "
                "here with the server's system identifier")
    if needs.superuser and not endpoint.facts.is_superuser:
        return "it needs a superuser on the server it probes"
    return None


def why_skipped(family: Family, ctx: FamilyContext) -> str | None:
    """Why ``family`` will not run in this session (its needs, then its own ``applicable``), or None: the one
    decision ``tuner recommend`` acts on and ``tuner check`` reports."""
    return unmet_needs(family.needs, ctx) or family.applicable(ctx)


def skipped(name: str, reason: str, section: ReportSection | None = None) -> FamilyResult:
    return FamilyResult(FamilyOutcome(family=name, status="skipped", reason=reason), section=section)


class Registry:
    """Families by name, imported when first used (``"module:Class"``), so that the command line and the
    configuration can list them without importing what they probe with. Every entry is a :class:`Family`."""

    def __init__(self, entries: Mapping[str, str]) -> None:
        self._where = dict(entries)
        self._loaded: dict[str, Family] = {}

    def names(self) -> tuple[str, ...]:
        return tuple(self._where)

    def register(self, family: type[Family]) -> None:
        """Add (or replace) a family class; for families that live outside tuner, and tests."""
        self._loaded[family.name] = _instantiate(family, f"{family.__module__}:{family.__qualname__}")
        self._where[family.name] = f"{family.__module__}:{family.__qualname__}"

    def unregister(self, name: str) -> None:
        self._where.pop(name, None)
        self._loaded.pop(name, None)

    def get(self, name: str) -> Family:
        if name not in self._loaded:
            module, _, cls = self._where[name].partition(":")
            self._loaded[name] = _instantiate(getattr(importlib.import_module(module), cls), self._where[name])
        return self._loaded[name]

    def section_types(self, kind: Literal["policy", "report"]) -> dict[str, type[BaseModel]]:
        """Per family that declares one, the model of its policy table or report section, in registry order
        (what :mod:`tuner.report.by_family` asks; the families are imported for it)."""
        out: dict[str, type[BaseModel]] = {}
        for name in self.names():
            family = self.get(name)
            model = family.policy_section if kind == "policy" else family.report_section
            if model is not None:
                out[name] = model
        return out

    def ordered(self, names: Iterable[str]) -> list[Family]:
        """The chosen families, each after the ones it names in ``after`` (registry order otherwise)."""
        chosen = [n for n in self._where if n in set(names)]
        done: list[str] = []
        while len(done) < len(chosen):
            ready = [n for n in chosen if n not in done and all(a in done or a not in chosen
                                                                 for a in self.get(n).after)]
            if not ready:
                raise ValueError(f"families {sorted(set(chosen) - set(done))} wait for each other (see 'after')")
            done.append(ready[0])
        return [self.get(n) for n in done]


def _instantiate(cls: Any, where: str) -> Family:
    """An instance of the family class ``cls`` (found at ``where``); a class that is not a :class:`Family`
    subclass is refused, naming what it lacks."""
    if not (isinstance(cls, type) and issubclass(cls, Family)):
        raise TypeError(f"{where} is not a tuner.families.base.Family subclass")
    missing = [a for a in ("name", "needs", "summary") if not hasattr(cls, a)]
    if missing:
        raise TypeError(f"{where} does not set {', '.join(missing)}")
    return cls()
