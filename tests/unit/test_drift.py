"""The drift check's pure part: what counts as a change, what each change calls for, and which wins."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tuner.daemon.drift import Action, Change, action, changes_json, compare
from tuner.hostfacts import limits
from tuner.target.fingerprint import recommendation_key, size_band

GIB = 1 << 30


def _setting(value: Any, source: str = "default", sourcefile: str | None = None, sourceline: int | None = None,
             family: str = "concurrency", unit: str | None = None) -> dict[str, Any]:
    return {"value": value, "unit": unit, "source": source, "sourcefile": sourcefile, "sourceline": sourceline,
            "family": family}


def _fp() -> dict[str, Any]:
    return {
        "observed_at": "2026-01-01T00:00:00+00:00",
        "server": {"major": 15, "server_version_num": 150018, "system_identifier": "7000", "timeline": 1,
                   "postmaster_start": "2026-01-01T00:00:00+00:00", "in_recovery": False},
        "settings": {"effective_io_concurrency": _setting(1),
                     "maintenance_io_concurrency": _setting(10),
                     "wal_writer_delay": _setting(200, family="wal", unit="ms")},
        "devices": {
            "vda": {"node": "/dev/vda", "model": None, "serial": "disk0", "rotational": 1, "scheduler": "mq-deadline",
                    "read_ahead_kb": 128, "roles": ["data directory", "pg_wal"]},
            "loop3": {"node": "/dev/loop3", "model": None, "serial": "/var/tmp/disk.img", "rotational": 0,
                      "scheduler": "none", "read_ahead_kb": 128, "roles": ["tablespace fast"]},
        },
        "kernel": "6.1.0-18-amd64",
        "cgroup": {"path": "/system.slice/postgresql.service", "memory.max": "max", "io.max": "max", "cpu.max": None},
        "size": {"band": 1, "label": "fits in memory", "database_bytes": 3 * GIB, "memory_bytes": 16 * GIB,
                 "memory_basis": "MemTotal", "shared_buffers_bytes": GIB},
    }


def _after(**changes: Any) -> dict[str, Any]:
    """A copy of :func:`_fp` with ``changes`` applied: a path ("devices__loop3__read_ahead_kb") -> its new value
    (``_GONE``: removed)."""
    fp = _fp()
    fp["observed_at"] = "2026-01-01T00:10:00+00:00"
    for path, value in changes.items():
        *parents, last = path.split("__")
        node = fp
        for p in parents:
            node = node[p]
        if value is _GONE:
            del node[last]
        else:
            node[last] = value
    return fp


_GONE = object()


def _drift(recommended: dict[str, Any] | None = None, **changes: Any) -> tuple[list[Change], Action]:
    found = compare(_fp(), _after(**changes))
    return found, action(found, recommended or {})


# -- compare ---------------------------------------------------------------------------------------------------
def test_nothing_changed_but_the_time_of_observation_is_no_change() -> None:
    assert compare(_fp(), _after()) == []


def test_the_databases_growing_within_their_band_is_no_change() -> None:
    assert compare(_fp(), _after(size__database_bytes=5 * GIB)) == []


def test_a_value_the_role_could_not_read_is_not_a_change() -> None:
    assert compare(_fp(), _after(server__system_identifier=None, server__timeline=None, kernel=None, cgroup=None,
                                 size=None)) == []


def test_devices_unseen_on_one_side_are_not_compared() -> None:
    """A check from another host (or a role that may not see the data directory) sees no devices: not gone."""
    assert compare(_fp(), _after(devices=None)) == []


def test_a_line_moved_within_its_file_is_not_a_change() -> None:
    auto = "/var/lib/postgresql/15/main/postgresql.auto.conf"
    before = _after(settings__effective_io_concurrency=_setting(32, "configuration file", auto, 3))
    after = _after(settings__effective_io_concurrency=_setting(32, "configuration file", auto, 4))
    assert compare(before, after) == []


def test_a_fingerprint_survives_a_json_round_trip_unchanged() -> None:
    fp = _after(**{"settings__effective_io_concurrency:fast": _setting(8, "tablespace fast")})
    assert compare(json.loads(json.dumps(fp)), fp) == []


def test_a_setting_change_says_where_each_value_came_from() -> None:
    [c] = compare(_fp(), _after(settings__effective_io_concurrency=_setting(
        32, "configuration file", "/var/lib/postgresql/15/main/postgresql.auto.conf", 3)))
    assert c.key == "setting:effective_io_concurrency" and c.kind == "setting"
    assert c.sentence() == "effective_io_concurrency changed from 1 (default) to 32 (postgresql.auto.conf:3)"


def test_a_setting_without_a_readable_file_names_its_source() -> None:
    [c] = compare(_fp(), _after(settings__wal_writer_delay=_setting(100, "configuration file", family="wal",
                                                                     unit="ms")))
    assert c.sentence() == "wal_writer_delay changed from 200 ms (default) to 100 ms (configuration file)"


def test_a_device_readahead_change_names_the_device() -> None:
    [c] = compare(_fp(), _after(devices__loop3__read_ahead_kb=4096))
    assert c.key == "device:loop3:read_ahead_kb" and (c.before, c.after) == (128, 4096)
    assert c.sentence() == "read_ahead_kb of /dev/loop3 changed from 128 to 4096"
    assert c.recommendation == recommendation_key("read_ahead_kb", "/dev/loop3") == "read_ahead_kb:/dev/loop3"


def test_a_tablespace_setting_is_its_own_change() -> None:
    [c] = compare(_fp(), _after(**{"settings__effective_io_concurrency:fast": _setting(8, "tablespace fast")}))
    assert c.key == "setting:effective_io_concurrency:fast" and c.recommendation == "effective_io_concurrency:fast"
    assert c.sentence() == ("effective_io_concurrency of tablespace fast changed from the server's value to 8 "
                            "(ALTER TABLESPACE)")


def test_a_major_upgrade_is_said_once() -> None:
    found = compare(_fp(), _after(server__major=16, server__server_version_num=160004))
    assert [c.key for c in found] == ["server:major"]
    assert found[0].sentence() == "the PostgreSQL major version changed from 15 to 16"


# -- action: each rule ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("changes", [
    {"server__major": 16, "server__server_version_num": 160004},
    {"server__system_identifier": "7001"},
    {"devices__loop3__serial": "/var/tmp/other.img"},
    {"devices__vda__model": "Samsung SSD 990"},
    {"devices__nvme0n1": {"node": "/dev/nvme0n1", "model": "X", "serial": "S1", "rotational": 0,
                          "scheduler": "none", "read_ahead_kb": 128, "roles": ["pg_wal"]}},
], ids=["major", "system identifier", "serial", "model", "device appeared"])
def test_a_new_server_cluster_or_device_calls_for_a_full_session(changes: dict[str, Any]) -> None:
    _, act = _drift(**changes)
    assert (act.kind, act.families, act.knobs) == ("session", (), ())


def test_a_device_that_no_longer_holds_a_directory_is_recorded() -> None:
    found, act = _drift(devices__loop3=_GONE)
    assert [c.key for c in found] == ["device:loop3"] and act.kind == "record"
    assert "/dev/loop3 no longer holds tablespace fast" in act.reason


def test_a_setting_drifted_from_its_recommendation_is_revalidated() -> None:
    _, act = _drift({"effective_io_concurrency": 32},
                    settings__effective_io_concurrency=_setting(7, "configuration file"))
    assert (act.kind, act.knobs) == ("revalidate", ("effective_io_concurrency",))
    assert "effective_io_concurrency changed from 1 (default) to 7 (configuration file)" in act.reason


def test_a_setting_moved_to_its_recommendation_is_recorded() -> None:
    _, act = _drift({"effective_io_concurrency": "32"}, settings__effective_io_concurrency=_setting(32, "override"))
    assert act.kind == "record"


def test_a_setting_without_a_recommendation_reprobes_its_family() -> None:
    _, act = _drift(settings__wal_writer_delay=_setting(50, "configuration file", family="wal", unit="ms"))
    assert (act.kind, act.families, act.knobs) == ("reprobe", ("wal",), ())


def test_a_setting_that_only_moved_to_another_file_is_recorded() -> None:
    found, act = _drift(settings__effective_io_concurrency=_setting(1, "configuration file", "/etc/pg/conf.d/x", 1))
    assert len(found) == 1 and act.kind == "record"


def test_readahead_drifted_from_its_recommendation_is_revalidated() -> None:
    _, act = _drift({"read_ahead_kb:/dev/loop3": 512}, devices__loop3__read_ahead_kb=4096)
    assert (act.kind, act.knobs) == ("revalidate", ("read_ahead_kb:/dev/loop3",))


def test_readahead_without_a_recommendation_reprobes_the_readahead_family() -> None:
    _, act = _drift(devices__loop3__read_ahead_kb=4096)
    assert (act.kind, act.families) == ("reprobe", ("readahead",))


@pytest.mark.parametrize(("changes", "why"), [
    ({"kernel": "6.12.0-1-amd64"}, "kernel"),
    ({"cgroup__memory.max": str(4 * GIB)}, "cgroup limit"),
    ({"cgroup__io.max": "8:0 rbps=1048576 wbps=max riops=max wiops=max"}, "cgroup limit"),
    ({"devices__vda__scheduler": "none"}, "scheduler"),
    ({"size__band": 2, "size__label": "up to 2x memory", "size__database_bytes": 20 * GIB}, "fits in memory"),
], ids=["kernel", "memory.max", "io.max", "scheduler", "size band up"])
def test_what_moves_every_measurement_reprobes_every_family(changes: dict[str, Any], why: str) -> None:
    _, act = _drift(**changes)
    assert (act.kind, act.families, act.knobs) == ("reprobe", (), ())
    assert why in act.reason


def test_shrinking_into_a_lower_band_is_recorded() -> None:
    _, act = _drift(size__band=0, size__label="fits in shared_buffers", size__database_bytes=GIB // 2)
    assert act.kind == "record"


def test_moving_to_another_cgroup_with_the_same_limits_is_recorded() -> None:
    _, act = _drift(cgroup__path="/system.slice/postgresql@15-main.service")
    assert act.kind == "record"


@pytest.mark.parametrize("changes", [
    {"server__postmaster_start": "2026-01-01T00:05:00+00:00"},
    {"server__timeline": 2},
    {"server__postmaster_start": "2026-01-01T00:05:00+00:00", "server__timeline": 2, "server__in_recovery": True},
    {"server__server_version_num": 150019},
], ids=["restart", "timeline", "restart, timeline, standby", "minor update"])
def test_a_restart_or_a_new_timeline_alone_is_recorded(changes: dict[str, Any]) -> None:
    found, act = _drift(**changes)
    assert act.kind == "record" and len(found) == len(changes)
    assert all(c.sentence() in act.reason for c in found)


def test_no_change_is_recorded_as_nothing() -> None:
    assert action([], {}).kind == "record"


# -- action: precedence and merging ------------------------------------------------------------------------------
def test_a_session_wins_over_everything_and_the_reason_names_every_change() -> None:
    found, act = _drift({"effective_io_concurrency": 32}, server__major=16, kernel="6.12.0",
                        settings__effective_io_concurrency=_setting(7, "configuration file"),
                        devices__loop3__read_ahead_kb=4096, server__timeline=2)
    assert act.kind == "session" and len(found) == 5
    assert all(c.sentence() in act.reason for c in found)
    assert act.reason.startswith("A full session") and act.reason.endswith(".") and "\n" not in act.reason


def test_reprobing_every_family_wins_over_revalidation_and_some_families() -> None:
    _, act = _drift({"effective_io_concurrency": 32}, kernel="6.12.0",
                    settings__effective_io_concurrency=_setting(7, "configuration file"),
                    devices__loop3__read_ahead_kb=4096)
    assert (act.kind, act.families, act.knobs) == ("reprobe", (), ())


def test_a_reprobe_keeps_the_revalidations_of_other_families() -> None:
    _, act = _drift({"effective_io_concurrency": 32, "read_ahead_kb:/dev/loop3": 512},
                    settings__effective_io_concurrency=_setting(7, "configuration file"),
                    settings__wal_writer_delay=_setting(50, "configuration file", family="wal", unit="ms"),
                    devices__loop3__read_ahead_kb=4096)
    assert (act.kind, act.families) == ("reprobe", ("wal",))
    assert act.knobs == ("read_ahead_kb:/dev/loop3", "effective_io_concurrency")  # in the changes' key order


def test_a_reprobe_of_a_family_covers_that_familys_revalidations() -> None:
    _, act = _drift({"effective_io_concurrency": 32},
                    settings__effective_io_concurrency=_setting(7, "configuration file"),
                    settings__maintenance_io_concurrency=_setting(20, "configuration file"))
    assert (act.kind, act.families, act.knobs) == ("reprobe", ("concurrency",), ())


def test_several_drifted_recommendations_are_revalidated_together() -> None:
    _, act = _drift({"effective_io_concurrency": 32, "read_ahead_kb:/dev/loop3": 512},
                    settings__effective_io_concurrency=_setting(7, "configuration file"),
                    devices__loop3__read_ahead_kb=4096)
    assert (act.kind, act.knobs) == ("revalidate", ("read_ahead_kb:/dev/loop3", "effective_io_concurrency"))


# -- changes_json -------------------------------------------------------------------------------------------------
def test_changes_json_round_trips_in_the_stored_shape() -> None:
    found, _ = _drift(settings__effective_io_concurrency=_setting(7, "configuration file"),
                      devices__loop3__read_ahead_kb=4096, server__timeline=2)
    doc = changes_json(found)
    assert json.loads(json.dumps(doc)) == doc
    assert doc["device:loop3:read_ahead_kb"] == {"kind": "device", "from": 128, "to": 4096,
                                                 "sentence": "read_ahead_kb of /dev/loop3 changed from 128 to 4096"}
    assert set(doc) == {"setting:effective_io_concurrency", "device:loop3:read_ahead_kb", "server:timeline"}
    assert all(set(v) == {"kind", "from", "to", "sentence"} for v in doc.values())


# -- size bands ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("size", "band"), [
    (GIB // 2, 0), (GIB, 0), (GIB + 1, 1), (16 * GIB, 1), (16 * GIB + 1, 2), (32 * GIB, 2), (48 * GIB, 3),
    (100 * GIB, 4), (128 * GIB, 4), (129 * GIB, 5), (10_000 * GIB, 5),
])
def test_size_bands_follow_how_much_of_the_data_fits_in_memory(size: int, band: int) -> None:
    assert size_band(size, shared_buffers_bytes=GIB, memory_bytes=16 * GIB) == band


def test_size_bands_never_fall_as_data_grows() -> None:
    bands = [size_band(n * GIB // 4, GIB, 16 * GIB) for n in range(1, 2000)]
    assert bands == sorted(bands)


# -- host facts on a tree shaped like /proc and a cgroup2 mount ---------------------------------------------------
def _cgroup_tree(tmp_path: Path, files: dict[str, str]) -> tuple[Path, Path]:
    data, proc, cg = tmp_path / "data", tmp_path / "proc", tmp_path / "cg"
    data.mkdir()
    (data / "postmaster.pid").write_text("4242\n/var/lib/postgresql/15/main\n")
    (proc / "4242").mkdir(parents=True)
    (proc / "4242" / "cgroup").write_text("0::/system.slice/postgresql.service\n")
    (proc / "self").mkdir()
    (proc / "self" / "mountinfo").write_text(f"30 23 0:26 / {cg} rw,nosuid - cgroup2 cgroup2 rw\n")
    (cg / "system.slice" / "postgresql.service").mkdir(parents=True)
    for rel, text in files.items():
        (cg / rel).write_text(text + "\n")
    return data, proc


def test_the_binding_cgroup_limits_are_the_tightest_along_the_path_up(tmp_path: Path) -> None:
    data, proc = _cgroup_tree(tmp_path, {
        "system.slice/postgresql.service/memory.max": "max", "system.slice/memory.max": str(8 * GIB),
        "system.slice/postgresql.service/cpu.max": "150000 100000", "system.slice/cpu.max": "50000 100000",
        "system.slice/postgresql.service/io.max": "", "system.slice/io.max": "8:0 rbps=1048576 wbps=max",
    })
    assert limits.cgroup(data, proc=proc) == {
        "path": "/system.slice/postgresql.service", "memory.max": str(8 * GIB), "cpu.max": "50000 100000",
        "io.max": "8:0 rbps=1048576 wbps=max"}


def test_unlimited_and_absent_cgroup_limits_are_max_and_none(tmp_path: Path) -> None:
    data, proc = _cgroup_tree(tmp_path, {"system.slice/postgresql.service/memory.max": "max",
                                         "system.slice/postgresql.service/io.max": ""})
    assert limits.cgroup(data, proc=proc) == {
        "path": "/system.slice/postgresql.service", "memory.max": "max", "io.max": "max", "cpu.max": None}


def test_no_cgroup2_mount_gives_no_cgroup(tmp_path: Path) -> None:
    data, proc = _cgroup_tree(tmp_path, {})
    (proc / "self" / "mountinfo").write_text("22 1 8:1 / / rw - ext4 /dev/sda1 rw\n")
    assert limits.cgroup(data, proc=proc) is None
    assert limits.cgroup(tmp_path / "nowhere", proc=proc) is None


def test_memory_is_the_cgroup_limit_when_lower_than_ram(tmp_path: Path) -> None:
    (tmp_path / "meminfo").write_text("MemTotal:       16777216 kB\nMemFree: 1 kB\n")
    assert limits.memory({"memory.max": str(4 * GIB)}, proc=tmp_path) == (4 * GIB, "cgroup memory.max")
    assert limits.memory({"memory.max": "max"}, proc=tmp_path) == (16 * GIB, "MemTotal")
    assert limits.memory(None, proc=tmp_path) == (16 * GIB, "MemTotal")


def test_a_kernel_change_reads_as_one() -> None:
    assert Change("kernel:release", "kernel", "6.1", "6.12").sentence() == "the kernel release changed from 6.1 to 6.12"


def test_a_major_upgrade_s_session_says_what_each_major_crossed_changed_for_io() -> None:
    up = action(compare(_fp(), _after(server__major=19, server__server_version_num=190000)), {})
    assert up.kind == "session"
    assert "Since PostgreSQL 15: 17 reads sequential scans through read streams" in up.reason
    assert "19 removed io_workers for a pool that sizes itself (io_min_workers, io_max_workers)" in up.reason
    assert up.reason.index("17 reads") < up.reason.index("18 reads") < up.reason.index("19 removed")
    same_io = action(compare(_fp(), _after(server__major=16, server__server_version_num=160004)), {})
    assert same_io.kind == "session" and "Since PostgreSQL" not in same_io.reason  # 16 changed none of it
