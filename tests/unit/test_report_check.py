"""Issue #44, items 1, 6 and 10: what tuner reads back as a report — a report.json, a stored session, a report
built in memory — is checked like user input before any format is rendered from it, and a report file is read
like one (a regular file of bounded size). Each finding's test failed on the code before the check."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.unit.test_emit_formats import change_report, keep_report, make, readahead, rec
from tests.unit.test_store import make_report as stored_report
from tests.unit.test_store import save
from tuner import emit
from tuner.cli import main
from tuner.emit import quote
from tuner.emit.json import parse, to_json
from tuner.knobs import catalog
from tuner.hostfacts.blockdev import MATCH_KEYS, MATCH_SHAPES, device_of
from tuner.report.model import Report
from tuner.settings.placeholders import template_problem
from tuner.report.validate import ReportError, check
from tuner.report.file import MAX_REPORT_BYTES

FIXTURE = Path(__file__).parent.parent / "fixtures" / "reports" / "sandbox-all-families.json"
FORMATS = tuple(emit.EMITTERS)


def _cli(*args: str, state: Path) -> Any:
    with contextlib.chdir(state):  # no ./tuner.toml of the checkout is read
        return CliRunner().invoke(main, [*args, "--state-dir", str(state)], catch_exceptions=False)


def _refused(r: Any, expect: str) -> None:
    assert r.exit_code == 2, r.output
    lines = r.output.splitlines()
    assert len(lines) == 2 and lines[0].startswith("tuner: error: ") and lines[1].startswith("hint: "), r.output
    assert expect in lines[0], r.output


def _planted(**changes: Any) -> Report:
    """The change report with its first readahead recommendation's fields replaced."""
    rep = change_report()
    recs = list(rep.recommendations)
    i = next(i for i, r in enumerate(recs) if r.scope == "device")
    recs[i] = recs[i].model_copy(update=changes)
    return rep.model_copy(update={"recommendations": recs})


def _program_match() -> Report:
    rep = change_report()
    dev = next(r for r in rep.recommendations if r.scope == "device").device
    assert dev is not None
    return _planted(device=dev.model_copy(update={"match": {"PROGRAM": "/bin/touch SOMEFILE"}}))


# -- what tuner writes passes --------------------------------------------------------------------------------

@pytest.mark.parametrize("build", [change_report, keep_report], ids=["change", "keep"])
def test_the_reports_tuner_writes_pass(build: Any) -> None:
    rep = build()
    assert check(rep) is rep
    for fmt in FORMATS:
        emit.render(rep, fmt)


def test_a_real_sandbox_report_passes_and_renders_every_format() -> None:
    rep = parse(FIXTURE.read_text())
    assert check(rep) is rep
    assert all(emit.render(rep, fmt) is not None for fmt in FORMATS)


def test_every_device_match_discovery_produces_passes(tmp_path: Path) -> None:
    """The shapes of devices._match_keys, built from a sysfs-shaped tree, each pass the check and render."""
    made = []
    for name, files in {
        "dm-0": {"dm/uuid": "LVM-abc", "dm/name": "vg-pg"}, "dm-1": {"dm/name": "vg-wal"},
        "loop3": {"loop/backing_file": "/srv/disk.img"}, "sdb": {"device/wwid": "naa.5000"},
        "nvme0n1": {"wwid": "eui.0025"}, "vdc": {"serial": "SN-1"}, "vdd": {},
    }.items():
        root = tmp_path / name
        sys_dir = root / "block" / name
        (sys_dir / "queue").mkdir(parents=True)
        (sys_dir / "queue" / "read_ahead_kb").write_text("128\n")
        (sys_dir / "dev").write_text("8:0\n")
        for rel, text in files.items():
            (sys_dir / rel).parent.mkdir(parents=True, exist_ok=True)
            (sys_dir / rel).write_text(text + "\n")
        (root / "dev" / "block").mkdir(parents=True)
        (root / "dev" / "block" / "8:0").symlink_to(sys_dir)
        dev = device_of("8:0", sys_root=root)
        assert dev is not None
        made.append(readahead(name, dev.match))
    assert {frozenset(r.device.match) for r in made if r.device} == set(MATCH_SHAPES)
    rep = make(*made)
    assert check(rep) is rep
    assert emit.render(rep, "udev")["udev/99-tuner-readahead.rules"].count("ATTR{queue/read_ahead_kb}=") == 7


# -- item 1: a udev rule cannot be made to run a program ------------------------------------------------------

@pytest.mark.parametrize("key", ["PROGRAM", "IMPORT{program}", "IMPORT{cmdline}", "RUN", "RUN{program}",
                                 "ENV{ID_FS_TYPE}", "ATTR{queue/scheduler}", "NAME", "OWNER", "GOTO", "LABEL",
                                 "OPTIONS", "SYMLINK", "TAG", "kernel", "Kernel", "ATTR{wwid}=", ""])
def test_udev_value_writes_only_the_match_keys_tuner_produces(key: str) -> None:
    with pytest.raises(quote.Unrenderable, match="not a udev match key"):
        quote.udev_value(key, "x")


def test_udev_value_still_writes_every_key_discovery_produces() -> None:
    for key in MATCH_KEYS:
        assert quote.udev_value(key, "loop*" if key == "KERNEL" else "v").startswith(f'{key}=="')


def test_a_program_key_in_a_report_file_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    src = tmp_path / "report.json"
    src.write_text(to_json(change_report()).replace('"ATTR{wwid}": "eui.0025385b71b0f1a2"',
                                                    '"PROGRAM": "/bin/touch SOMEFILE"'))
    assert "PROGRAM" in src.read_text()
    for fmt in ("udev", "ansible", "json", "sql", "tuned"):
        r = _cli("export", "--format", fmt, "--from", str(src), "--output", str(tmp_path / "out"), state=tmp_path)
        _refused(r, "device.match has the key 'PROGRAM', which tuner never writes")
    r = _cli("export", "--format", "udev", "--from", str(src), state=tmp_path)
    _refused(r, "PROGRAM")
    assert not (tmp_path / "out").exists()


def test_a_program_key_planted_in_the_store_is_refused_by_show_and_export(tmp_path: Path) -> None:
    bad = _program_match().model_copy(update={"target": stored_report("a").target})
    save(tmp_path / "tuner.db", bad)
    _refused(_cli("show", "--format", "json", state=tmp_path), "stored session 3f2a91c0d7e4 cannot be used")
    _refused(_cli("export", "--format", "udev", state=tmp_path), "PROGRAM")
    _refused(_cli("show", "--output", str(tmp_path / "out"), state=tmp_path), "PROGRAM")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("match", [{"KERNEL": "sd*"}, {"KERNEL": "loop*"}, {"KERNEL": "sdc"},
                                   {"KERNEL": "sdb", "ATTR{serial}": "x"}, {"ATTR{loop/backing_file}": "/x"},
                                   {"ATTR{serial}": "a\nRUN+=\"/bin/sh\""}, {"ATTR{serial}": ""}, {}])
def test_a_device_match_tuner_would_not_produce_is_refused(match: dict[str, str]) -> None:
    rep = make(readahead("sdb", match))
    with pytest.raises(ReportError, match=r"recommendations\[0\]\.device\.match"):
        emit.render(rep, "udev")


@pytest.mark.parametrize("changes", [
    {"object": "/dev/sdc"}, {"device": None}, {"scope": "system", "object": None},
    {"knob": "effective_io_concurrency"},
], ids=["object-is-another-device", "no-device", "device-on-a-system-setting", "another-knob-on-a-device"])
def test_a_device_recommendation_names_one_device_consistently(changes: dict[str, Any]) -> None:
    with pytest.raises(ReportError):
        emit.render(_planted(**changes), "udev")


@pytest.mark.parametrize("field,value", [("node", "/dev/sda"), ("name", "../sda"),
                                         ("sysfs_path", "/sys/block/sda/queue/read_ahead_kb")])
def test_a_device_node_name_and_sysfs_path_agree(field: str, value: str) -> None:
    rep = change_report()
    r = next(r for r in rep.recommendations if r.scope == "device")
    assert r.device is not None
    with pytest.raises(ReportError, match=f"device.{field}"):
        check(_planted(device=r.device.model_copy(update={field: value})))


# -- item 6: exports trust knob names and values no more ------------------------------------------------------

DANGEROUS = ["archive_command", "ssl_passphrase_command", "shared_preload_libraries", "listen_addresses",
             "restore_command", "log_directory", "dynamic_library_path", "session_preload_libraries", "fsync",
             "synchronous_commit", "full_page_writes", "work_mem", "Effective_IO_Concurrency",
             "EFFECTIVE_IO_CONCURRENCY", "effective_io_concurrency ", "auto_explain.log_min_duration"]


@pytest.mark.parametrize("knob", DANGEROUS)
@pytest.mark.parametrize("fmt", ["conf", "sql", "patroni", "zalando", "ansible", "cnpg", "json", "table"])
def test_a_knob_outside_the_catalogue_is_refused_by_every_format(knob: str, fmt: str) -> None:
    rep = make(rec(knob=knob, current="off", recommended="/bin/sh -c 'touch /tmp/x'", source="configuration file"))
    with pytest.raises(ReportError, match=r"recommendations\[0\]\.knob"):
        emit.render(rep, fmt)


def test_archive_command_in_a_report_file_writes_nothing(tmp_path: Path) -> None:
    src = tmp_path / "report.json"
    data = json.loads(to_json(change_report()))
    data["recommendations"][0].update(knob="archive_command", recommended="touch /tmp/pwned")
    src.write_text(json.dumps(data))
    for fmt in ("conf", "sql", "patroni", "zalando", "ansible"):
        r = _cli("export", "--format", fmt, "--from", str(src), "--output", str(tmp_path / "out"), state=tmp_path)
        _refused(r, "recommendations[0].knob 'archive_command' is not a setting tuner tunes")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("version", [0, 2, 99, -1])
def test_an_unknown_schema_version_is_refused(version: int) -> None:
    rep = change_report().model_copy(update={"schema_version": version})
    with pytest.raises(ReportError, match=f"schema_version {version} is not the one this tuner reads"):
        emit.render(rep, "conf")


def test_the_decision_values_are_optional_and_pass_in_range() -> None:
    """Issue #45 item 5: min_effect and alpha are additive fields — a report without them (written before they
    were carried) passes, and so does one with the policy's values."""
    old = parse(FIXTURE.read_text())
    assert old.min_effect is None and old.alpha is None and check(old) is old
    rep = change_report().model_copy(update={"min_effect": 1.05, "alpha": 0.05})
    assert check(rep) is rep
    assert parse(to_json(rep)).min_effect == 1.05


@pytest.mark.parametrize(("field", "value"), [
    ("min_effect", float("nan")), ("min_effect", float("inf")), ("min_effect", 0.9), ("min_effect", 101.0),
    ("alpha", float("nan")), ("alpha", 0.0), ("alpha", 0.5), ("alpha", -0.1),
])
def test_decision_values_outside_the_policys_ranges_are_refused(field: str, value: float) -> None:
    with pytest.raises(ReportError, match=field):
        check(change_report().model_copy(update={field: value}))


def test_a_knob_twice_for_one_object_is_refused() -> None:
    with pytest.raises(ReportError, match=r"recommendations\[1\] repeats effective_io_concurrency"):
        emit.render(make(rec(), rec(recommended=64)), "conf")
    with pytest.raises(ReportError, match="repeats read_ahead_kb"):
        emit.render(make(readahead("sdb", {"ATTR{serial}": "a"}), readahead("sdb", {"ATTR{serial}": "a"})), "udev")
    # one knob for the server and for a tablespace, or for two tablespaces, is not a repeat
    ok = make(rec(), rec(scope="tablespace", object="a", source="server", run_on="primary"),
              rec(scope="tablespace", object="A", source="server", run_on="primary"))
    assert check(ok) is ok


@pytest.mark.parametrize("knob,value,why", [
    ("effective_io_concurrency", 1001, "outside effective_io_concurrency's range 0..1000"),
    ("effective_io_concurrency", -1, "range"),
    ("effective_io_concurrency", "256", "not an integer"),
    ("effective_io_concurrency", "256\narchive_command = 'x'", "not an integer"),
    ("wal_buffers", 262144, "range"),
    ("wal_compression", "lz4'\narchive_command = 'touch /tmp/x", "not a value of wal_compression"),
    ("wal_compression", "LZ4", "not a value"),
    ("io_method", "io_uring", "does not exist on a server of version 150018"),
])
def test_values_are_checked_against_the_knobs_type_and_range(knob: str, value: Any, why: str) -> None:
    rep = make(rec(knob=knob, recommended=value, current="off" if knob == "wal_compression" else 1))
    with pytest.raises(ReportError, match=why.replace("(", r"\(").replace(")", r"\)")):
        emit.render(rep, "patroni")


def test_a_newline_value_never_reaches_patronis_writer() -> None:
    rep = make(rec(knob="wal_compression", current="off", recommended="on\narchive_command = 'touch /tmp/x'"))
    with pytest.raises(ReportError, match=r"recommendations\[0\]\.recommended 'on\\narchive_command"):
        emit.render(rep, "patroni")


def test_todays_readahead_may_lie_above_the_catalogues_bound_but_not_the_recommendation() -> None:
    high = catalog.load().spec("read_ahead_kb", 150018).max + 4096  # type: ignore[operator]
    rep = make(readahead("sdb", {"ATTR{serial}": "a"}, current=high))
    assert check(rep) is rep
    with pytest.raises(ReportError, match="recommended"):
        check(make(readahead("sdb", {"ATTR{serial}": "a"}, recommended=high)))


@pytest.mark.parametrize("field,value,named", [
    ("source", "configuration file\n", "source"), ("source", "evil", "source"),
    ("together_with", ["archive_command"], "together_with"), ("object", "/dev/sdb", "object"),
    ("scope", "tablespace", "object"), ("scope", "device", "scope"),
])
def test_the_other_fields_of_a_recommendation_are_tuners_own(field: str, value: Any, named: str) -> None:
    with pytest.raises(ReportError, match=f"recommendations\\[0\\]\\.{named}"):
        check(make(rec(**{field: value})))


@pytest.mark.parametrize("field,value", [("host", "h\nx"), ("kernel", "6.18\x1b[2J"), ("policy", "p\u2028"),
                                         ("id", "../../etc")])
def test_the_sessions_identity_is_one_line(field: str, value: str) -> None:
    rep = change_report()
    with pytest.raises(ReportError, match=f"session.{field}"):
        check(rep.model_copy(update={"session": rep.session.model_copy(update={field: value})}))


@pytest.mark.parametrize("field,value", [("server_version", "15.18\n-- x"), ("mode", "hot_standby\r"),
                                         ("system_identifier", "7\u2029")])
def test_the_targets_identity_is_one_line_but_a_dsn_may_span_lines(field: str, value: str) -> None:
    rep = change_report()
    with pytest.raises(ReportError, match=f"target.{field}"):
        check(rep.model_copy(update={"target": rep.target.model_copy(update={field: value})}))
    multi = rep.model_copy(update={"target": rep.target.model_copy(update={"dsn": "host=staging1\ndbname=app"})})
    assert check(multi) is multi


def test_a_report_built_in_memory_is_checked_before_recommend_output_is_written(tmp_path: Path) -> None:
    with pytest.raises(ReportError):
        emit.write_outputs(make(rec(knob="archive_command")), tmp_path / "out")
    assert not (tmp_path / "out").exists()


# -- item 10: report files are read like user input; helper_command templates -----------------------------

def test_dev_zero_a_fifo_and_a_directory_are_one_sentence_and_never_hang(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo.json")
    (tmp_path / "dir.json").mkdir()
    for path, expect in (("/dev/zero", "not a regular file"), (str(tmp_path / "fifo.json"), "not a regular file"),
                         (str(tmp_path / "dir.json"), "is a directory"), ("/dev/null", "not a regular file")):
        _refused(_cli("export", "--format", "conf", "--from", path, state=tmp_path), expect)


def test_a_report_file_larger_than_the_limit_is_refused_unread(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    with big.open("wb") as fh:
        fh.truncate(MAX_REPORT_BYTES + 1)  # sparse: nothing of it is read
    _refused(_cli("export", "--format", "conf", "--from", str(big), state=tmp_path), "larger than 64 MiB")


@pytest.mark.parametrize("text,expect", [("[" * 100000, "nested too deeply"),
                                         ('{"schema_version": 1' + "0" * 5000 + "}", "number too long"),
                                         ("{}", "problems, first at target")])
def test_a_report_file_that_is_not_a_report_is_one_sentence(tmp_path: Path, text: str, expect: str) -> None:
    (tmp_path / "r.json").write_text(text)
    _refused(_cli("export", "--format", "conf", "--from", str(tmp_path / "r.json"), state=tmp_path), expect)


@pytest.mark.parametrize("command", ["{0}", "{}", "{path.__class__}", "{value[0]}", "{path!r}", "{value:>99}",
                                     "{value:{path}}", "sudo {device", "sudo }", "{PATH}", "{cmd}"])
def test_helper_command_takes_only_its_three_placeholders(command: str, tmp_path: Path) -> None:
    assert template_problem(command)
    (tmp_path / "t.toml").write_text(f"[readahead]\nhelper_command = {json.dumps(command)}\n")
    with contextlib.chdir(tmp_path):
        r = CliRunner().invoke(main, ["config", "validate", "--config", str(tmp_path / "t.toml")])
    _refused(r, "[readahead] helper_command: ")


@pytest.mark.parametrize("command", ["sudo -n /usr/local/sbin/tuner-sysfs {path} {value}",
                                     "echo {value} | sudo tee {path} # {device}", "awk '{{print}}' {path}", "true"])
def test_helper_command_templates_that_work_pass(command: str) -> None:
    assert template_problem(command) is None


# -- the daemon's API: a planted report is a 4xx with the sentence, never a 500 or the rule ----------------------

def test_the_api_answers_a_planted_report_with_422_and_the_sentence() -> None:
    from tests.unit.test_daemon_api import Backend, call

    class Planted(Backend):
        async def rendered(self, target: str, fmt: str) -> dict[str, str]:
            return emit.render(_program_match(), fmt)  # what Daemon.rendered does with what the store gave it

    for fmt in ("udev", "ansible", "json"):
        status, body, _ = call(Planted(), "GET", f"/v1/recommendations/default?format={fmt}")
        assert status == 422 and "PROGRAM" in body["error"] and "\n" not in body["error"] and body["hint"], body
