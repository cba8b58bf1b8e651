"""The same answer when nothing changed (issue #53), through the flow ``tuner recommend`` and the daemon's worker
share (:func:`tuner.session.stored.run_stored`: a real store, a real hot standby, the runner): a value accepted
before is kept while a new session finds it inside its near-optimal range, and replaced once it lies outside.

The family here is a test family on ``maintenance_io_concurrency`` whose probe is the package's synthetic probe (pure logic, seeded:
a plateau that starts where the test says), so that which side of the range the accepted value falls on is the
test's to choose; everything around it — the interlock, the store's accepted set, the plateau rule in the tuning
step, the decision, the saved report — is the real path."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, ClassVar, Literal

from tuner.settings.config import Config
from tuner.core.tune import tune
from tuner.core.decide import recommendation
from tuner.families import REGISTRY
from tuner.families.base import Family, FamilyContext, FamilyResult, Needs
from tuner.report.model import FamilyOutcome, Trial
from tuner.optimiser import Dimension
from tuner.settings.policy import load_policy
from tuner.report.validate import check
from tuner.store import open_store, target_id
from tuner.session.stored import run_stored
from tests.support.synthetic import SyntheticProbe

from .conftest import Running

KNOB = "maintenance_io_concurrency"  # a knob the store knows; its probe here is synthetic


class Plateau(Family):
    """``maintenance_io_concurrency`` over a surface that is slow below ``START`` and level above it."""

    name: ClassVar[str] = "plateau_test"
    needs: ClassVar[Needs] = Needs()
    after: ClassVar[tuple[str, ...]] = ()
    summary: ClassVar[str] = "maintenance_io_concurrency over a synthetic plateau (a test family)"
    START = 1024
    SEED = 1

    def applicable(self, ctx: FamilyContext) -> str | None:
        return None

    async def run(self, ctx: FamilyContext) -> FamilyResult:
        start = self.START
        synthetic = SyntheticProbe(lambda c: 300.0 if c[KNOB] < start else 100.0, noise_cv=0.03, seed=self.SEED)

        async def probe(config: dict[str, Any], *, phase: Literal["search", "confirm"] = "search",
                        arm: Literal["baseline", "candidate"] | None = None) -> Trial:
            await ctx.target.check()  # the interlock holds around every probe, as in the shipped families
            return await synthetic(config, phase=phase, arm=arm)

        async with ctx.connection() as conn:
            today = int(await conn.fetchval("SELECT setting FROM pg_settings WHERE name = $1", KNOB))
        tuned = await tune(ctx, self.name, probe, [Dimension(KNOB, 0, 1000)], {KNOB: today})
        assert tuned.decided is not None
        rec = recommendation(KNOB, tuned.decided, source="default", requires="reload")
        return FamilyResult(FamilyOutcome(family=self.name, status="done", reason="searched"), trials=tuned.trials,
                            recommendations=[rec])


def _session(sandbox: Running, cfg: Config, *, start: int, seed: int) -> Any:
    # The store keeps a session's start to the second, and "the latest session" (the warm start's prior, what is
    # in force) is ordered by it: sessions of a synthetic probe can start within one second (a clean clone's CI ran
    # three in one), which would leave their order to their ids. A real session takes minutes.
    time.sleep(1.1)
    Plateau.START, Plateau.SEED = start, seed
    stored = sandbox.run(run_stored(cfg, load_policy("default"), use_sandbox=False, families=(Plateau.name,)))
    assert stored.stored, stored.problem
    [rec] = stored.report.recommendations
    return stored.report, rec


def _accepted(sandbox: Running, cfg: Config, report: Any) -> dict[str, Any]:
    async def read() -> dict[str, Any]:
        async with open_store(cfg, check=check) as db:
            assert db is not None
            fp = report.target.fingerprint or {}
            tid = target_id(report.target.system_identifier, fp.get("data_directory"), fp.get("label", ""))
            return {r.knob: r.recommended for _, r in await db.accepted.find(tid)}
    return sandbox.run(read())


def test_an_accepted_value_is_kept_inside_the_range_and_replaced_outside(sandbox15: Running, tmp_path: Path) -> None:
    cfg = Config.model_validate({"target": {"dsn": sandbox15.sandbox.dsn("standby")},
                                 "tuner": {"state_dir": str(tmp_path / "state")}})
    REGISTRY.register(Plateau)
    try:
        # Today's 10 (15's default) lies below the plateau (from 32): the first session changes it; it is accepted.
        report, first = _session(sandbox15, cfg, start=32, seed=1)
        assert first.current == 10 and first.decision == "change" and first.recommended >= 32, first
        assert _accepted(sandbox15, cfg, report) == {KNOB: first.recommended}
        # Nothing changed: sessions with other noise find other bests on the plateau, and keep the accepted one.
        for seed in (2, 3, 4):
            report, again = _session(sandbox15, cfg, start=32, seed=seed)
            assert again.recommended == first.recommended and again.decision == "change", again
            assert f"kept the accepted {KNOB} = {first.recommended}: inside today's near-optimal" in again.reason \
                or "the search's best" not in again.reason  # the search's own answer was the accepted value
            assert _accepted(sandbox15, cfg, report) == {KNOB: first.recommended}
        # The plateau moved above the accepted value (the workload grew): it lies outside, and is replaced.
        start = min(4 * first.recommended, 1000)
        assert start > first.recommended
        report, moved = _session(sandbox15, cfg, start=start, seed=5)
        assert moved.decision == "change" and moved.recommended >= start, moved
        assert "accepted" not in moved.reason
        assert _accepted(sandbox15, cfg, report) == {KNOB: moved.recommended}
    finally:
        REGISTRY.unregister(Plateau.name)
