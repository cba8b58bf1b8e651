from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tuner.emit import host, sql, write_outputs
from tuner.emit.json import parse, to_json
from tuner.emit.table import to_table
from tuner.files import atomic_write
from tuner.model import CacheEvidence, DeviceRef, EffectOut, FamilyOutcome, Recommendation, Report, SessionOut, TargetOut, Trial

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
    from tuner.knobs.devices import BlockDevice

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
