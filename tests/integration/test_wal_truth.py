"""benchmarks/wal_truth.py's claim that the standby's flushes are kept off the measured device (issue #55): on
``flush=5ms`` one client's commits run at about half the flush rate while the hot standby's WAL receiver flushes
the same WAL on the same loop device, and at about the full rate once :func:`wal_truth.detach_standby` ran."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from benchmarks import wal_truth
from benchmarks.devices_run import run_session
from tuner.families import REGISTRY
from tuner.families.base import Family, FamilyContext, FamilyResult, Needs
from tuner.probes import walload
from tuner.report.model import FamilyOutcome
from tuner.session.runner import recommend
from tuner.settings.config_load import load_config
from tuner.settings.policy import load_policy

from .conftest import processes_under

SEEN: dict[str, Any] = {}


class _Commits(Family):
    """One client's 10-row commits for 2 s, before and after the standby is detached."""

    name: ClassVar[str] = "walcommitstest"
    needs: ClassVar[Needs] = Needs(writable=True, superuser=True)
    after: ClassVar[tuple[str, ...]] = ()
    summary: ClassVar[str] = "test only"

    def applicable(self, ctx: FamilyContext) -> str | None:
        return None

    async def run(self, ctx: FamilyContext) -> FamilyResult:
        where = ctx.writable
        assert where is not None
        async with ctx.connection(where) as conn:
            await walload.prepare(conn)

        async def tps() -> float:
            res = await walload.run(None, clients=1, rows_per_tx=10, duration_s=2.0, warmup_s=0.3,
                                    connector=where.connect)
            return res.tps

        try:
            SEEN["with_standby"] = await tps()
            SEEN["detached"] = await wal_truth.detach_standby(ctx)
            async with ctx.connection(where) as conn:
                SEEN["senders"] = await conn.fetchval("SELECT count(*) FROM pg_stat_replication")
            SEEN["without"] = await tps()
        finally:
            async with ctx.connection(where) as conn:
                await walload.drop(conn)
        return FamilyResult(FamilyOutcome(family=self.name, status="done", reason="measured"), trials=[])


def test_detaching_the_standby_takes_its_flushes_off_the_measured_device(base_dir: Path, tmp_path: Path) -> None:
    cfg = load_config(None, environ={"TUNER_SANDBOX__DEVICE": "flush=5ms", "TUNER_SANDBOX__SCALE": "1",
                                     "TUNER_SANDBOX__BASE_DIR": str(base_dir),
                                     "TUNER_TUNER__STATE_DIR": str(tmp_path / "state")})
    REGISTRY.register(_Commits)
    try:
        report = run_session(recommend(cfg, load_policy("default"), use_sandbox=True, families=(_Commits.name,),
                                       store=None, warm_start=False))
    finally:
        REGISTRY.unregister(_Commits.name)
    [fam] = report.families
    assert fam.status == "done", fam
    assert "WAL receiver gone" in SEEN["detached"] and SEEN["senders"] == 0, SEEN
    # at most 1 / 5 ms = 200 commits a second either way; ~2 flushes per commit with the standby, ~1 without
    assert SEEN["without"] <= 200 and SEEN["without"] >= 1.4 * SEEN["with_standby"], SEEN
    assert not list(base_dir.iterdir()) and not processes_under(base_dir)
