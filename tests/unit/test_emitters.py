from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tuner.emit import host, sql, write_outputs
from tuner.emit.json import parse, to_json
from tuner.emit.table import to_table
from tuner.fs.atomic import atomic_write
from tuner.report.model import CacheEvidence, DeviceRef, EffectOut, FamilyOutcome, Recommendation, Report, SessionOut, TargetOut, Trial

GOLDEN = Path(__file__).parent.parent / "fixtures" / "golden"
UPDATE = os.environ.get("TUNER_UPDATE_GOLDEN") == "1"
T0 = datetime(2026, 12, 2, 12, 0, 0, tzinfo=UTC)


def report(decision: str = "change") -> Report:
    change = decision == "change"
    rec = Recommendation(
        knob="effective_io_concurrency", scope="system", object=None, current=1, recommended=256, source="default",
        near_optimal=(64, 1000), decision=decision,  # type: ignore[arg-type]
        reason="the whole CI lies above the minimum effect 1.05x" if change else "the whole CI lies below the minimum effect 1.05x",
        effect=EffectOut(metric="execution_time_ms", improvement=3.1 if change else 1.01, ci95=(2.8, 3.4) if change else (0.97, 1.04),
                         decision_ci=(2.6, 3.6) if change else (0.95, 1.06),
                         n_pairs=6, p_value=0.001 if change else 0.6, looks=1, method="t"),
        requires="reload",
    )
    return Report(
        target=TargetOut(server_version_num=150018, server_version="15.18", in_recovery=True, system_identifier="7",
                         mode="hot_standby", dsn="sandbox (removed)", sandbox=True),
        session=SessionOut(id="abc123", started_at=T0, duration_s=42.0, probes=2, policy="default", seed=1,
                           cache="cold", host="staging1", kernel="6.18"),
        families=[FamilyOutcome(family="concurrency", status="done", reason="ok")],
        recommendations=[rec],
        trials=[Trial(config={"effective_io_concurrency": 1}, value=2817.5, status="ok", phase="search",
                      cache=CacheEvidence(shared_read=172114, shared_hit=2, heap_read=170000, heap_hit=0,
                                          io_read_time_ms=2000.0, method="drop_caches"),
                      started_at=T0, duration_s=3.2)],
    )


def _golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.write_text(text)
    assert text == path.read_text(), f"{name} changed; rerun with TUNER_UPDATE_GOLDEN=1 if intended"


@pytest.mark.parametrize("decision", ["change", "keep"])
def test_sql_matches_golden(decision: str) -> None:
    _golden(f"recommendation-{decision}.sql", sql.render(report(decision)))


def test_rollback_sql_matches_golden() -> None:
    _golden("rollback-change.sql", sql.render_rollback(report("change")))


def test_table_matches_golden() -> None:
    _golden("report-change.txt", to_table(report("change")))


def test_json_has_the_documented_fields() -> None:
    doc = json.loads(to_json(report()))
    assert doc["schema_version"] == 1
    assert {"server_version_num", "in_recovery", "system_identifier"} <= doc["target"].keys()
    assert {"id", "started_at", "duration_s", "probes"} <= doc["session"].keys()
    rec = doc["recommendations"][0]
    assert {"knob", "scope", "object", "current", "recommended", "near_optimal", "decision", "effect",
            "apply_sql", "rollback_sql", "requires"} <= rec.keys()
    assert {"metric", "improvement", "ci95", "n_pairs", "p_value"} <= rec["effect"].keys()
    assert doc["trials"][0]["cache"]["shared_read"] == 172114


def test_rollback_restores_a_non_default_value_explicitly() -> None:
    assert sql.rollback_system("effective_io_concurrency", 8, "configuration file") == (
        "ALTER SYSTEM SET effective_io_concurrency = 8;"
    )
    assert sql.rollback_system("effective_io_concurrency", 1, "default") == "ALTER SYSTEM RESET effective_io_concurrency;"


def test_sql_refuses_a_setting_name_that_is_not_an_identifier() -> None:
    with pytest.raises(ValueError):
        sql.alter_system("x; DROP TABLE y", 1)


def test_output_directory_gets_every_format(tmp_path: Path) -> None:
    written = write_outputs(report(), tmp_path / "out")
    assert sorted(p.name for p in written) == ["recommendation.sql", "report.html", "report.json", "report.txt", "rollback.sql"]
    json.loads((tmp_path / "out" / "report.json").read_text())
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".")]  # no temp files left


def test_atomic_write_leaves_the_old_file_when_writing_fails(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    target.write_text("old")

    with pytest.raises(TypeError):
        atomic_write(target, 12345)  # type: ignore[arg-type]
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_family_outcome_carries_how_the_cache_was_made_cold() -> None:
    out = FamilyOutcome(family="concurrency", status="done", reason="ok", cache="shared buffers: restart; OS page cache: fadvise")
    assert json.loads(out.model_dump_json())["cache"].endswith("fadvise")


def readahead_report(tmp_path: Path) -> Report:
    """A device change on a loop device plus an eic change for its tablespace (to run on the primary)."""
    from tuner.families.readahead import device_ref
    from tuner.hostfacts.blockdev import BlockDevice

    dev = BlockDevice(name="loop3", kind="loop", majmin="7:3", description="loop device loop3",
                      sys_dir=tmp_path / "block" / "loop3",
                      match={"KERNEL": "loop*", "ATTR{loop/backing_file}": "/srv/disk.img"})
    ref = device_ref(dev)
    assert ref == DeviceRef(node="/dev/loop3", name="loop3", sysfs_path="/sys/block/loop3/queue/read_ahead_kb",
                            match=dev.match)
    effect = EffectOut(metric="weighted_execution_time_ms", improvement=16.95, ci95=(14.75, 19.47),
                       decision_ci=(14.0, 20.0), n_pairs=6, p_value=1e-6, looks=1, method="t")
    ra = Recommendation(
        knob="read_ahead_kb", scope="device", object="/dev/loop3", current=0, recommended=512, near_optimal=(276, 1888),
        source="kernel", decision="change", reason="the whole CI lies above the minimum effect 1.05x", effect=effect,
        requires="reopen", run_on="host", device=ref, together_with=["effective_io_concurrency"],
    )
    eic = Recommendation(
        knob="effective_io_concurrency", scope="tablespace", object="fast", current=1, recommended=64, near_optimal=(32, 128),
        source="server", decision="change", reason="on its own, at read_ahead_kb = 512: above the minimum effect",
        effect=effect, requires="reload", run_on="primary", together_with=["read_ahead_kb"],
    )
    return report().model_copy(update={"recommendations": [ra, eic]})


def test_readahead_commands_count_sectors_and_match_the_device_stably(tmp_path: Path) -> None:
    r = host.commands(readahead_report(tmp_path).recommendations[0])
    assert r is not None
    assert r.apply_blockdev == "blockdev --setra 1024 /dev/loop3"
    assert r.apply_sysfs == "echo 512 > /sys/block/loop3/queue/read_ahead_kb"
    assert r.rollback_blockdev == "blockdev --setra 0 /dev/loop3"
    assert r.udev_rule == ('ACTION=="add|change", SUBSYSTEM=="block", KERNEL=="loop*", '
                                'ATTR{loop/backing_file}=="/srv/disk.img", ATTR{queue/read_ahead_kb}="512"')


def test_tablespace_sql_runs_on_the_primary_and_has_a_rollback(tmp_path: Path) -> None:
    rep = readahead_report(tmp_path)
    text = sql.render(rep)
    assert "-- run on the primary: ALTER TABLESPACE cannot run on a standby" in text
    assert "ALTER TABLESPACE fast SET (effective_io_concurrency = 64);" in text
    assert "-- on host staging1, as root (not SQL): blockdev --setra 1024 /dev/loop3" in text
    assert "pg_reload_conf" not in text  # no ALTER SYSTEM: nothing to reload
    back = sql.render_rollback(rep)
    assert "ALTER TABLESPACE fast RESET (effective_io_concurrency);" in back and "blockdev --setra 0 /dev/loop3" in back
    assert sql.alter_tablespace("Fast Disk", "effective_io_concurrency", 8) == 'ALTER TABLESPACE "Fast Disk" SET (effective_io_concurrency = 8);'


def test_readahead_files_are_written_only_when_a_device_changes(tmp_path: Path) -> None:
    out = tmp_path / "out"
    names = {p.name for p in write_outputs(readahead_report(tmp_path), out)}
    assert {"readahead.sh", "readahead-rollback.sh", "99-tuner-readahead.rules"} <= names
    rules = (out / "99-tuner-readahead.rules").read_text()
    assert rules.count('ATTR{queue/read_ahead_kb}="512"') == 1 and "16.95x" in rules
    assert "blockdev --setra 1024 /dev/loop3" in (out / "readahead.sh").read_text()
    assert "rm -f /etc/udev/rules.d/99-tuner-readahead.rules" in (out / "readahead-rollback.sh").read_text()
    table = to_table(readahead_report(tmp_path))
    assert "read_ahead_kb (/dev/loop3)" in table and "persist:" in table and "(on the primary)" in table
    plain = {p.name for p in write_outputs(report(), tmp_path / "plain")}
    assert "readahead.sh" not in plain


def test_an_enum_setting_is_emitted_as_a_quoted_literal() -> None:
    # A WAL run whose wal_compression screen said "change" crashed here with int('lz4').
    assert sql.alter_system("wal_compression", "lz4") == "ALTER SYSTEM SET wal_compression = 'lz4';"
    assert sql.rollback_system("wal_compression", "off", "configuration file") == (
        "ALTER SYSTEM SET wal_compression = 'off';")
    assert sql.alter_system("effective_io_concurrency", 256) == "ALTER SYSTEM SET effective_io_concurrency = 256;"


def test_json_carries_the_statements_rendered_from_the_data(tmp_path: Path) -> None:
    doc = json.loads(to_json(readahead_report(tmp_path)))
    ra, eic = doc["recommendations"]
    assert ra["apply_sql"] is None and ra["host"]["apply_blockdev"] == "blockdev --setra 1024 /dev/loop3"
    assert eic["apply_sql"] == "ALTER TABLESPACE fast SET (effective_io_concurrency = 64);"
    assert eic["rollback_sql"] == "ALTER TABLESPACE fast RESET (effective_io_concurrency);"
    keep = json.loads(to_json(report("keep")))["recommendations"][0]
    assert keep["apply_sql"] is None and keep["rollback_sql"] is None and keep["host"] is None


def test_a_written_report_reads_back_as_the_same_data(tmp_path: Path) -> None:
    for rep in (report("change"), report("keep"), readahead_report(tmp_path)):
        assert parse(to_json(rep)) == rep


def test_a_tablespace_with_a_value_of_its_own_rolls_back_to_it() -> None:
    rec = Recommendation(knob="effective_io_concurrency", scope="tablespace", object="fast", current=8,
                         recommended=64, source="tablespace", near_optimal=None, decision="change", reason="r",
                         effect=None, requires="reload", run_on="primary")
    assert sql.rollback_sql(rec) == "ALTER TABLESPACE fast SET (effective_io_concurrency = 8);"


def plateau_report() -> Report:
    """The README's first command on a plateau: effective_io_concurrency level with the best from 8 to 1000 (the
    knob's own maximum), and a readahead window whose best is the top of a policy's range (8192)."""
    from tuner.report.near import NearRange

    base = report("change")
    eic = base.recommendations[0].model_dump() | {
        "recommended": 16, "near_optimal": NearRange(8, 1000, searched=(0, 1000), limits=(True, True), plateau=True)}
    for k in ("plateau", "searched", "at_edge", "edge_is_limit"):
        eic.pop(k)
    ra = Recommendation(
        knob="read_ahead_kb", scope="device", object="/dev/loop3", current=128, recommended=8192, source="kernel",
        near_optimal=NearRange(4096, 8192, searched=(0, 8192), limits=(True, False)), decision="change",
        reason="the whole CI lies above the minimum effect 1.05x", effect=base.recommendations[0].effect,
        requires="reopen", run_on="host",
        device=DeviceRef(node="/dev/loop3", name="loop3", sysfs_path="/sys/block/loop3/queue/read_ahead_kb",
                         match={"KERNEL": "loop3"}))
    return base.model_copy(update={"recommendations": [ra, Recommendation(**eic)]})


def test_table_shows_a_plateau_as_a_plateau_and_an_edge_as_an_edge() -> None:
    text = to_table(plateau_report())
    _golden("report-plateau.txt", text)
    flat = " ".join(text.split())
    assert "plateau 8..1000" in flat and "8192 (edge)" in flat
    assert ("plateau from 8 to 1000, up to the top of the searched range 0..1000: the measurements cannot tell these "
            "values apart from the best (within the policy's minimum effect and confidence)") in flat
    assert ("at the edge: 8192 is the highest value searched (0..8192, the policy's range): the optimum may lie "
            "beyond it; widen [search.read_ahead_kb] max to look further") in flat
    assert "16 (edge)" not in flat  # the recommended 16 is no edge, though its plateau reaches one


def test_an_edge_that_is_the_knobs_own_limit_says_so_and_offers_no_widening() -> None:
    rec = plateau_report().recommendations[1].model_copy(update={"recommended": 1000, "at_edge": "upper",
                                                                  "edge_is_limit": True})
    from tuner.emit import ranges

    assert ranges.notes(rec)[-1] == "at the edge: 1000 is the highest value searched (0..1000), its maximum on this server"
    assert ranges.notes(rec.model_copy(update={"plateau": False, "at_edge": None})) == []


def test_a_kept_value_on_a_plateau_is_named_as_kept() -> None:
    from tuner.emit import ranges

    rec = plateau_report().recommendations[1].model_copy(update={"current": 64, "decision": "keep"})
    assert ranges.notes(rec)[0].endswith("; today's value 64 lies on it: keep it")
    # Said once: where the decision's reason names today's value in the range already, the note does not repeat it.
    said = rec.model_copy(update={"reason": "the interval reaches below 1.05x; today's value 64 lies inside the "
                                            "plateau from 8 to 1000"})
    assert ranges.notes(said)[0].endswith("(within the policy's minimum effect and confidence)")


def test_sql_and_json_carry_the_plateau_and_the_edge() -> None:
    r = plateau_report()
    text = sql.render(r)
    assert "-- plateau from 8 to 1000" in text and "-- at the edge: 8192 is the highest value searched" in text
    doc = json.loads(to_json(r))
    ra, eic = doc["recommendations"]
    assert (ra["at_edge"], ra["searched"], ra["edge_is_limit"], ra["plateau"]) == ("upper", [0, 8192], False, False)
    assert (eic["at_edge"], eic["searched"], eic["plateau"], eic["near_optimal"]) == (None, [0, 1000], True, [8, 1000])
    assert parse(to_json(r)).recommendations == r.recommendations
