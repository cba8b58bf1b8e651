"""Issue #36: the config-management formats (conf, ansible, patroni, cnpg, zalando, udev, tuned) and `tuner export`.

Golden files (tests/fixtures/golden/export/<case>/, the tree `tuner export --output` writes; TUNER_UPDATE_GOLDEN=1
rewrites them), what each format carries and refuses, and the export command's bad inputs. The real consumers
run in tests/integration/test_consumers.py; hostile names and values in tests/unit/test_hostile_output.py.
"""

from __future__ import annotations

import configparser
import json
import os
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from click.testing import CliRunner

from tests.unit.test_store import make_report as stored_report
from tests.unit.test_store import save
from tuner import emit
from tuner.cli import main
from tuner.emit import ansible, cnpg, conf, host, patroni, tuned, udev, zalando
from tuner.emit.json import to_json
from tuner.report.model import DeviceRef, EffectOut, Recommendation, Report, SessionOut, TargetOut

GOLDEN = Path(__file__).parent.parent / "fixtures" / "golden" / "export"
UPDATE = os.environ.get("TUNER_UPDATE_GOLDEN") == "1"
T0 = datetime(2026, 12, 2, 12, 0, 0, tzinfo=UTC)
NEW = ("conf", "ansible", "patroni", "cnpg", "zalando", "udev", "tuned")
EFFECT = EffectOut(metric="execution_time_ms", improvement=3.1, ci95=(2.8, 3.4), decision_ci=(2.6, 3.6), n_pairs=6,
                   p_value=0.001, looks=1, method="t")
RA_EFFECT = EffectOut(metric="weighted_execution_time_ms", improvement=1.42, ci95=(1.21, 1.66), decision_ci=(1.1, 1.8),
                      n_pairs=8, p_value=0.002, looks=1, method="t")


def rec(**kw: Any) -> Recommendation:
    base: dict[str, Any] = dict(knob="effective_io_concurrency", scope="system", object=None, current=1,
                                recommended=256, source="default", near_optimal=(64, 1000), decision="change",
                                reason="the whole CI lies above the minimum effect 1.05x", effect=EFFECT,
                                requires="reload")
    return Recommendation.model_validate(base | kw)


def device(name: str, match: dict[str, str]) -> DeviceRef:
    return DeviceRef(node=f"/dev/{name}", name=name, sysfs_path=f"/sys/block/{name}/queue/read_ahead_kb", match=match)


def readahead(name: str, match: dict[str, str], current: int = 128, recommended: int = 512) -> Recommendation:
    return rec(knob="read_ahead_kb", scope="device", object=f"/dev/{name}", current=current, recommended=recommended,
               source="kernel", near_optimal=(384, 1024), requires="reopen", run_on="host", effect=RA_EFFECT,
               device=device(name, match))


def make(*recs: Recommendation, version: int = 150018) -> Report:
    return Report(
        target=TargetOut(server_version_num=version, server_version="15.18", in_recovery=True, system_identifier="7",
                         mode="hot_standby", dsn="host=staging1", sandbox=False),
        session=SessionOut(id="3f2a91c0d7e4", started_at=T0, duration_s=420.0, probes=61, policy="default", seed=1,
                           cache="cold", host="staging1", kernel="6.18"),
        families=[], recommendations=list(recs), trials=[])


def change_report() -> Report:
    """Every kind of change: a default (RESET on rollback), a value from a configuration file (set back), a
    restart, a tablespace's option, an NVMe namespace with a WWID and a loop device; and one "keep"."""
    return make(
        rec(),
        rec(knob="wal_compression", current="off", recommended="lz4", source="configuration file", near_optimal=None),
        rec(knob="wal_buffers", current=-1, recommended=2048, near_optimal=None, requires="restart"),
        rec(scope="tablespace", object="fast", recommended=64, source="server", run_on="primary",
            together_with=["read_ahead_kb"]),
        readahead("nvme0n1", {"ATTR{wwid}": "eui.0025385b71b0f1a2"}),
        readahead("loop3", {"KERNEL": "loop*", "ATTR{loop/backing_file}": "/srv/pg/disk.img"}, current=0),
        rec(knob="wal_writer_delay", current=200, recommended=1000, decision="keep",
            reason="the interval reaches below the minimum effect"),
    )


def keep_report() -> Report:
    return make(rec(decision="keep", recommended=16, reason="the interval reaches below the minimum effect"),
                rec(knob="wal_writer_delay", current=200, recommended=1000, decision="keep", reason="same"))


CASES = {"change": change_report, "keep": keep_report}


# -- golden files ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", NEW)
@pytest.mark.parametrize("case", sorted(CASES))
def test_files_match_golden(case: str, fmt: str) -> None:
    files = emit.render(CASES[case](), fmt)
    root = GOLDEN / case
    if UPDATE:
        for name, body in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(body)
    dirs = {Path(name).parent for name in files}  # conf.d and rollback/conf.d, ansible and rollback/ansible, ...
    stored = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and p.relative_to(root).parent in dirs}
    assert stored == set(files), f"{fmt} files changed; rerun with TUNER_UPDATE_GOLDEN=1 if intended"
    for name, body in files.items():
        assert body == (root / name).read_text(), f"{case}/{name} changed; rerun with TUNER_UPDATE_GOLDEN=1"


# -- what every format carries --------------------------------------------------------------------------------

def test_every_new_format_is_a_choice_of_recommend_show_and_export() -> None:
    from tuner.cli import export, recommend, show
    from tuner.settings.config_load import load_config

    assert set(NEW) <= set(emit.FORMATS)
    for command in (recommend, show, export):
        option = next(p for p in command.params if p.name == "fmt")
        assert set(NEW) <= set(option.type.choices)  # type: ignore[attr-defined]
    assert load_config(overrides={"output": {"format": "patroni"}}).output.format == "patroni"


def test_recommend_output_keeps_the_reports_files_and_export_writes_the_formats(tmp_path: Path) -> None:
    written = {p.relative_to(tmp_path).as_posix() for p in emit.write_outputs(change_report(), tmp_path)}
    assert written == {"report.txt", "report.json", "report.html", "recommendation.sql", "rollback.sql",
                       "readahead.sh", "readahead-rollback.sh", "99-tuner-readahead.rules"}


def _unwrapped(text: str) -> list[str]:
    """The lines of ``text`` with each wrapped comment (quote.comment: continuations indented "#   ") joined."""
    lines: list[str] = []
    for line in text.splitlines():
        if line.startswith("#   ") and lines:
            lines[-1] += " " + line[4:]
        else:
            lines.append(line)
    return lines


@pytest.mark.parametrize("fmt", NEW)
def test_only_changes_are_carried_each_with_its_evidence_and_provenance(fmt: str) -> None:
    files = emit.render(change_report(), fmt)
    main_file = next(iter(files.values()))
    assert "managed by tuner, session 3f2a91c0d7e4 (2026-12-02 12:00:00 UTC)" in main_file
    assert all("wal_writer_delay" not in body for body in files.values())  # a "keep" is not carried
    carried = {"conf": ["effective_io_concurrency", "wal_compression", "wal_buffers"],
               "patroni": ["effective_io_concurrency", "wal_compression", "wal_buffers"],
               "udev": ["read_ahead_kb of /dev/nvme0n1", "read_ahead_kb of /dev/loop3"],
               "tuned": ["read_ahead_kb of /dev/nvme0n1"],
               "ansible": ["effective_io_concurrency:", "wal_buffers", "effective_io_concurrency of tablespace fast",
                           "read_ahead_kb of /dev/nvme0n1", "read_ahead_kb of /dev/loop3"]}
    carried["cnpg"] = carried["zalando"] = carried["patroni"]
    for what in carried[fmt]:
        line = next(line for line in _unwrapped(main_file) if what in line and "faster" in line)
        if "read_ahead_kb" in what:
            assert "1.42x faster (weighted_execution_time_ms), 95% CI [1.21, 1.66], 8 pairs" in line, line
        else:
            assert "3.10x faster (execution_time_ms), 95% CI [2.80, 3.40], 6 pairs" in line, line
        assert "session 3f2a91c0d7e4, 2026-12-02" in line


@pytest.mark.parametrize("fmt", NEW)
def test_keep_what_you_have_is_an_empty_change_set_that_says_so(fmt: str) -> None:
    files = emit.render(keep_report(), fmt)
    main_file = next(iter(files.values()))
    assert "keep what you have: no change earned its evidence in session 3f2a91c0d7e4" in main_file
    for name, body in files.items():
        if name.endswith((".yaml", ".yml")):
            doc = yaml.safe_load(body.replace("!unsafe", ""))
            if fmt == "ansible" and name.endswith("vars.yml"):
                assert doc["tuner_settings"] == doc["tuner_tablespaces"] == doc["tuner_readahead"] == []
            elif fmt != "ansible":
                params = doc["spec"]["postgresql"]["parameters"] if "spec" in doc else doc["postgresql"]["parameters"]
                assert params == {}
        elif name.endswith(".json"):
            assert json.loads(body)["postgresql"]["parameters"] == {}
        else:  # conf, udev, tuned: comments (and tuned's [main]) only
            assert all(line.startswith("#") or not line or line in ("[main]", "summary=readahead measured by tuner")
                       for line in body.splitlines()), body


def test_no_recommendation_at_all_is_said_too() -> None:
    assert "no recommendation: session 3f2a91c0d7e4 could measure nothing" in emit.text(make(), "conf")


# -- rollback twins -------------------------------------------------------------------------------------------

def test_rollback_removes_a_default_and_puts_a_configuration_files_value_back() -> None:
    rep = change_report()
    back = conf.render_rollback(rep)
    settings = [line for line in back.splitlines() if line and not line.startswith("#")]
    assert settings == ["wal_compression = 'off'"]
    assert "# effective_io_concurrency: back to 1, from the built-in default: no line here" in back
    doc, _ = patroni.patches(rep, rollback=True)
    assert doc == {"postgresql": {"parameters": {"effective_io_concurrency": None, "wal_compression": "off",
                                                 "wal_buffers": None}}}
    for module in (cnpg, zalando):
        k8s = yaml.safe_load(module.render(rep, rollback=True))
        assert k8s["spec"]["postgresql"]["parameters"] == doc["postgresql"]["parameters"]
        assert k8s["metadata"]["annotations"] == {"tuner/managed-by": None}
    data, _ = ansible.variables(rep, rollback=True)
    assert [(s["name"], s["value"]) for s in data["tuner_settings"]] == [
        ("effective_io_concurrency", "_RESET"), ("wal_compression", "off"), ("wal_buffers", "_RESET")]
    assert data["tuner_tablespaces"][0]["statement"] == "ALTER TABLESPACE fast RESET (effective_io_concurrency);"
    rules = udev.render(rep, rollback=True)
    assert 'ATTR{wwid}=="eui.0025385b71b0f1a2", ATTR{queue/read_ahead_kb}="128"' in rules
    assert 'ATTR{loop/backing_file}=="/srv/pg/disk.img", ATTR{queue/read_ahead_kb}="0"' in rules
    assert "readahead=128" in tuned.render(rep, rollback=True)


def test_an_ansible_rollback_of_a_value_set_elsewhere_sets_it_back_as_rollback_sql_does() -> None:
    r = rec(current=8, source="configuration file")
    data, _ = ansible.variables(make(r), rollback=True)
    assert data["tuner_settings"][0]["value"] == "8"


def test_a_value_from_a_source_above_the_files_is_removed_on_rollback_and_said_so() -> None:
    r = rec(current=32, source="user")
    text = conf.render(make(r))
    assert "today's effective_io_concurrency comes from 'user', which takes precedence over configuration files" in text
    assert "effective_io_concurrency = 256" in text
    assert "no line here" in conf.render_rollback(make(r))


# -- what each consumer cannot express or manages itself -------------------------------------------------------

@pytest.mark.parametrize("fmt", ["conf", "patroni", "cnpg", "zalando"])
def test_tablespace_and_device_changes_are_named_with_where_they_go(fmt: str) -> None:
    text = "\n".join(_unwrapped(emit.text(change_report(), fmt)))
    assert "effective_io_concurrency of tablespace fast: 1 -> 64:" in text
    assert "cannot set a tablespace's option; run ALTER TABLESPACE fast SET (effective_io_concurrency = 64); on " \
           "the primary" in text
    assert "read_ahead_kb of /dev/nvme0n1: 128 -> 512: a host setting, not PostgreSQL's; see the udev, tuned or " \
           "ansible format" in text


@pytest.mark.parametrize("fmt", ["udev", "tuned"])
def test_host_formats_name_the_server_settings_they_leave_out(fmt: str) -> None:
    text = emit.text(change_report(), fmt)
    assert "wal_compression: off -> lz4: a PostgreSQL setting, not the host's" in text


def test_conf_says_what_shadows_it() -> None:
    text = conf.render(change_report())
    assert "postgresql.auto.conf (ALTER SYSTEM) is read after include_dir and overrides this file" in text
    assert "WHERE name IN ('effective_io_concurrency', 'wal_compression', 'wal_buffers')" in text
    assert ("# today's wal_compression was read from a configuration file: if that is postgresql.auto.conf, it "
            "overrides this line (ALTER SYSTEM RESET wal_compression; first)") in text
    assert "# wal_buffers takes effect only after a restart" in text


@pytest.mark.parametrize("name", ["port", "listen_addresses", "cluster_name", "hot_standby", "primary_conninfo",
                                  "restore_command", "recovery_target_timeline", "synchronous_standby_names",
                                  "data_directory"])
def test_patroni_refuses_the_parameters_it_manages(name: str) -> None:
    rep = make(rec(knob=name, current="a", recommended="b", source="configuration file"), rec())
    doc, _ = patroni.patches(rep)
    assert doc["postgresql"]["parameters"] == {"effective_io_concurrency": "256"}
    assert set(doc) == {"postgresql"}  # provenance in comments: nothing of tuner's own in the cluster's config
    assert f"# {name}: refused: " in patroni.render_yaml(rep)
    assert name not in json.loads(patroni.render_json(rep))["postgresql"]["parameters"]
    assert name not in patroni.patches(rep, rollback=True)[0]["postgresql"]["parameters"]
    zdoc = yaml.safe_load(zalando.render(rep))
    assert name not in zdoc["spec"]["postgresql"]["parameters"] and "Patroni manages it" in zalando.render(rep)


def test_patroni_flags_a_value_that_needs_a_restart() -> None:
    doc, _ = patroni.patches(change_report())
    assert set(doc) == {"postgresql"} and "# pending_restart after it: wal_buffers" in patroni.render_yaml(
        change_report())
    assert "# wal_buffers: needs a restart: Patroni marks the members pending_restart" in \
        patroni.render_yaml(change_report())


def test_the_cloudnativepg_fixed_parameters_are_listed_with_their_source() -> None:
    # the examples, and the ones both the documentation and the source list
    assert {"listen_addresses", "port", "wal_level", "hot_standby", "archive_mode", "archive_command",
            "primary_conninfo", "restore_command", "shared_preload_libraries", "ssl", "unix_socket_directories",
            "synchronous_standby_names", "log_destination", "cluster_name"} <= cnpg.FIXED
    source = Path(cnpg.__file__).read_text()
    assert "docs/src/postgresql_conf.md" in source and "pkg/postgres/configuration.go" in source
    assert not {"effective_io_concurrency", "maintenance_io_concurrency", "commit_delay", "wal_compression",
                "wal_buffers", "wal_writer_delay"} & cnpg.FIXED  # tuner's own knobs can be set


@pytest.mark.parametrize("name", sorted(cnpg.FIXED))
def test_cloudnativepg_fixed_parameters_are_refused(name: str) -> None:
    rep = make(rec(knob=name, current="a", recommended="b", source="configuration file"), rec())
    doc = yaml.safe_load(cnpg.render(rep))
    assert doc["spec"]["postgresql"]["parameters"] == {"effective_io_concurrency": "256"}
    assert f"# {name}: refused: a fixed parameter of CloudNativePG" in cnpg.render(rep)
    assert name not in yaml.safe_load(cnpg.render(rep, rollback=True))["spec"]["postgresql"]["parameters"]


@pytest.mark.parametrize(("module", "api", "kind"), [(cnpg, "postgresql.cnpg.io/v1", "Cluster"),
                                                      (zalando, "acid.zalan.do/v1", "postgresql")])
def test_kubernetes_patches_have_the_right_kind_and_every_value_a_string(module: Any, api: str, kind: str) -> None:
    rep = make(rec(), rec(knob="wal_compression", current="off", recommended="on", source="configuration file"),
               rec(knob="commit_delay", current=0, recommended=100), rec(knob="wal_writer_delay", current=200,
                                                                         recommended=1000))
    for rollback in (False, True):
        doc = yaml.safe_load(module.render(rep, rollback=rollback))
        assert (doc["apiVersion"], doc["kind"]) == (api, kind)
        params = doc["spec"]["postgresql"]["parameters"]
        assert all(v is None or type(v) is str for v in params.values()), params
    params = yaml.safe_load(module.render(rep))["spec"]["postgresql"]["parameters"]
    assert params == {"effective_io_concurrency": "256", "wal_compression": "on", "commit_delay": "100",
                      "wal_writer_delay": "1000"}  # 'on' stays a string, not YAML's true
    assert "rolling restart" in cnpg.render(change_report())


# -- readahead: udev and tuned --------------------------------------------------------------------------------

def test_the_udev_format_is_hosts_rule_with_its_rollback() -> None:
    rep = change_report()
    lines = [line for line in udev.render(rep).splitlines() if line and not line.startswith("#")]
    assert lines == [host.commands(r).udev_rule for r in rep.recommendations if r.scope == "device"]  # type: ignore[union-attr]


def _tuned_sections(text: str) -> configparser.ConfigParser:
    """tuned's own reading of a profile (tuned/profiles/loader.py: '=' only, inline '#' comments, not strict)."""
    parser = configparser.ConfigParser(delimiters=("=",), inline_comment_prefixes=("#",), strict=False,
                                       interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(text)
    return parser


def _udev_properties(props: dict[str, str]) -> str:
    """A device's udev properties as tuned's DeviceMatcherUdev searches them: sorted KEY=value lines."""
    return "".join(f"{k}={v}\n" for k, v in sorted(props.items()))


@pytest.mark.parametrize(("name", "match", "props"), [
    ("nvme0n1", {"ATTR{wwid}": "eui.0025385b71b0f1a2"}, {"ID_WWN": "eui.0025385b71b0f1a2"}),
    ("vdb", {"ATTR{serial}": "pgdata-01"}, {"ID_SERIAL": "pgdata-01"}),
    ("dm-3", {"ENV{DM_UUID}": "LVM-abc123"}, {"DM_UUID": "LVM-abc123", "DM_NAME": "vg-pg"}),
])
def test_tuned_matches_a_stable_udev_property_in_kib(name: str, match: dict[str, str], props: dict[str, str]) -> None:
    text = tuned.render(make(readahead(name, match)))
    section = _tuned_sections(text)["tuner_disk_1"]
    assert section["type"] == "disk" and section["readahead"] == "512" and "devices" not in section
    regex = section["devices_udev_regex"]
    assert "$" not in regex.replace("$", "", 1) and "{" not in regex  # no ${...} for tuned to expand
    mine = _udev_properties({"DEVNAME": f"/dev/{name}", **props})
    other = _udev_properties({"DEVNAME": "/dev/sdq", **{k: v + "0" for k, v in props.items()}})
    assert re.search(regex, mine, re.MULTILINE) and not re.search(regex, other, re.MULTILINE)
    assert "readahead= is in KiB" in text


def test_tuned_uses_a_kernel_name_only_for_a_device_without_a_stable_identity() -> None:
    text = tuned.render(make(readahead("sdb", {"KERNEL": "sdb"})))
    assert _tuned_sections(text)["tuner_disk_1"]["devices"] == "sdb"
    assert "# matched by kernel name: the device has no WWID or serial" in text


@pytest.mark.parametrize("match", [{"ATTRS{wwid}": "naa.5000c500a0b1c2d3"},
                                   {"KERNEL": "loop*", "ATTR{loop/backing_file}": "/srv/disk.img"}])
def test_tuned_writes_nothing_rather_than_a_kernel_name_where_a_stable_identity_exists(match: dict[str, str]) -> None:
    text = "\n".join(_unwrapped(tuned.render(make(readahead("sdc", match)))))
    assert "[tuner_disk_1]" not in text and "devices=" not in text
    assert "which no udev property carries: use the udev format" in text
    assert 'ATTR{queue/read_ahead_kb}="512"' in udev.render(make(readahead("sdc", match)))


# -- ansible: module choice, plain values ---------------------------------------------------------------------

def test_ansible_uses_postgresql_set_before_postgresql_14() -> None:
    old = yaml.safe_load(ansible.render_playbook(make(rec(), version=130011)))
    new = yaml.safe_load(ansible.render_playbook(make(rec())))
    assert any("community.postgresql.postgresql_set" in t for t in old[1]["tasks"])
    assert any("community.postgresql.postgresql_alter_system" in t for t in new[1]["tasks"])
    assert not any("community.postgresql.postgresql_set" in t for t in new[1]["tasks"])


@pytest.mark.parametrize("value", ["it's", "a b", "x,y", "_RESET", "default", "{{ x }}", "1;2"])
def test_ansible_writes_no_value_the_alter_system_module_would_misread(value: str) -> None:
    data, notes = ansible.variables(make(rec(knob="wal_compression", current="off", recommended=value,
                                             source="configuration file")))
    assert data["tuner_settings"] == [] and "not written" in notes[0]


def test_ansible_restarts_only_when_asked() -> None:
    for play in yaml.safe_load(ansible.render_playbook(change_report()))[1:]:
        restart = next(t for t in play["tasks"] if "ansible.builtin.service" in t)
        assert "tuner_restart | default(false) | bool" in restart["when"]
        assert [h["name"] for h in play["handlers"]] == ["tuner | reload PostgreSQL", "tuner | reload udev rules",
                                                         "tuner | trigger the tuned block devices"]


def test_ansible_rolls_one_host_at_a_time_standbys_before_the_primary_in_one_play() -> None:
    text = ansible.render_playbook(change_report())
    roles, play = yaml.safe_load(text)  # the sorting play, then one play with serial (not one copy per role)
    assert roles["hosts"] == "{{ tuner_hosts | default('postgresql') }}"
    [in_recovery, group_by] = roles["tasks"]
    assert "pg_is_in_recovery()" in in_recovery["community.postgresql.postgresql_query"]["query"]
    assert ansible.STANDBYS in group_by["ansible.builtin.group_by"]["key"]
    assert play["hosts"] == f"{ansible.STANDBYS}:{ansible.PRIMARIES}"  # a union keeps its order: standbys first
    assert play["serial"] == "{{ tuner_serial | default(1) }}" and play["max_fail_percentage"] == 0
    names = [t["name"] for t in play["tasks"]]
    restart = names.index("tuner | restart PostgreSQL (only with -e tuner_restart=true)")
    assert names[restart + 1] == "tuner | wait until it accepts connections again, before the next host"
    assert len(text.splitlines()) < 180
    header = "\n".join(_unwrapped(text.split("---")[0]))
    assert "community.postgresql" in header and "pip install ansible" in header


def test_the_udev_trigger_reaches_only_the_tuned_devices() -> None:
    rep = change_report()
    data, _ = ansible.variables(rep)
    assert [r["kernel_name"] for r in data["tuner_readahead"]] == ["nvme0n1", "loop3"]
    play = yaml.safe_load(ansible.render_playbook(rep))[1]
    [trigger] = [h for h in play["handlers"] if isinstance(h.get("ansible.builtin.command"), dict)]
    assert trigger["ansible.builtin.command"]["argv"][-1] == "--sysname-match={{ item.kernel_name }}"
    assert trigger["loop"] == "{{ tuner_readahead }}"
    for text in (udev.render(rep), udev.render(rep, rollback=True), host.render_rules(rep)):
        command = next(line for line in _unwrapped(text) if "udevadm trigger" in line)
        assert "--sysname-match=loop3 --sysname-match=nvme0n1" in command
    assert "udevadm trigger" not in udev.render(keep_report())  # no device: reload only, trigger nothing


def test_every_fleet_export_comment_fits_100_columns() -> None:
    for fmt in ("ansible", "udev", "tuned"):
        for case in (change_report(), keep_report()):
            for name, body in emit.render(case, fmt).items():
                wide = [line for line in body.splitlines() if line.startswith("#") and len(line) > 100]
                assert not wide, (fmt, name, wide)
    for name, body in host.Host().render(change_report()).items():
        assert all(len(line) <= 100 for line in body.splitlines() if line.startswith("#")), name


def test_the_tuned_profile_names_no_placeholder_and_installs_after_the_profiles_active_now() -> None:
    for text in (tuned.render(change_report()), tuned.render(change_report(), rollback=True)):
        assert "@" not in text and "include" not in _tuned_sections(text)["main"]  # nothing left to hand-edit
        assert "tuned-adm active" in "\n".join(_unwrapped(text))
    assert f"tuned-adm profile {tuned.ACTIVE} {tuned.PROFILE}" in "\n".join(_unwrapped(tuned.render(change_report())))


# -- emit.render and history ----------------------------------------------------------------------------------

class _Historian:
    name: ClassVar[str] = "historian"
    stdout: ClassVar[bool] = True
    wants_history: ClassVar[bool] = True

    def render(self, report: Report, *, history: list[Any] | None = None) -> dict[str, str]:
        return {"h.txt": "unknown" if history is None else ",".join(s.id for s in history)}


def test_render_passes_history_only_to_emitters_that_want_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from tuner.store import SessionSummary

    monkeypatch.setitem(emit.EMITTERS, "historian", _Historian())
    s = SessionSummary(id="a1", target_id="t", target="x", started_at="2026", duration_s=1.0, kind="recommend",
                       server_version="15", policy="default", probes=1)
    assert emit.render(change_report(), "historian", history=[s]) == {"h.txt": "a1"}
    assert emit.render(change_report(), "historian") == {"h.txt": "unknown"}
    assert emit.render(change_report(), "historian", history=[]) == {"h.txt": ""}
    assert emit.render(change_report(), "conf", history=[s]) == conf.Conf().render(change_report())


# -- tuner export ---------------------------------------------------------------------------------------------

def _cli(*args: str, state: Path) -> Any:
    return CliRunner().invoke(main, ["export", *args, "--state-dir", str(state)], catch_exceptions=False)


def _one_sentence(r: Any, expect: str) -> None:
    assert r.exit_code == 2, r.output
    assert r.output.startswith("tuner: error: ") and expect in r.output.splitlines()[0], r.output
    assert r.output.count("\n") == 2 and r.output.splitlines()[1].startswith("hint: ")
    assert "Traceback" not in r.output


def test_export_prints_a_stored_sessions_main_file_and_writes_all_its_files(tmp_path: Path) -> None:
    a = stored_report("a1aaaaaaaaaa")
    b = stored_report("b2bbbbbbbbbb", at=T0 + timedelta(days=1), recommended=16)
    save(tmp_path / "tuner.db", a, b)
    r = _cli("--format", "conf", "--from", "a1aa", state=tmp_path)
    assert r.exit_code == 0 and r.stdout == emit.text(a, "conf")
    assert _cli("--format", "patroni", state=tmp_path).stdout == emit.text(b, "patroni")  # default: latest
    out = tmp_path / "out"
    r = _cli("--format", "ansible", "--from", "latest", "--output", str(out), state=tmp_path)
    assert r.exit_code == 0 and r.stdout == ""
    files = emit.render(b, "ansible")
    assert {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()} == set(files)
    assert all((out / name).read_text() == body for name, body in files.items())
    assert "tuner: wrote " in r.stderr


def test_export_reads_a_report_json_without_a_store(tmp_path: Path) -> None:
    from tuner.cli.cmd_store import export_source

    src = tmp_path / "report.json"
    src.write_text(to_json(change_report()))
    r = _cli("--format", "cnpg", "--from", str(src), state=tmp_path / "nowhere")
    assert r.exit_code == 0 and r.stdout == emit.text(change_report(), "cnpg")
    assert not (tmp_path / "nowhere").exists()
    assert export_source(None, tmp_path, str(src)) == (change_report(), None)  # its history is not known


def test_export_gives_the_emitter_the_targets_stored_sessions_newest_first(tmp_path: Path) -> None:
    from tuner.cli.cmd_store import export_source

    a = stored_report("a1aaaaaaaaaa")
    b = stored_report("b2bbbbbbbbbb", at=T0 + timedelta(days=1))
    other = stored_report("c3cccccccccc", at=T0 + timedelta(days=2), sysid="9009")
    save(tmp_path / "tuner.db", a, b, other)
    report, history = export_source(None, tmp_path, "a1")
    assert report == a and [s.id for s in history] == ["b2bbbbbbbbbb", "a1aaaaaaaaaa"]
    report, history = export_source(None, tmp_path, None)  # latest: the other target's, with its own history
    assert report == other and [s.id for s in history] == ["c3cccccccccc"]


def test_export_of_an_unknown_session_is_one_sentence(tmp_path: Path) -> None:
    save(tmp_path / "tuner.db", stored_report("a1aaaaaaaaaa"))
    _one_sentence(_cli("--format", "conf", "--from", "ffff", state=tmp_path), "no stored session starts with ffff")


def test_export_without_a_store_says_so_and_creates_nothing(tmp_path: Path) -> None:
    _one_sentence(_cli("--format", "conf", state=tmp_path), "no store at")
    assert not (tmp_path / "tuner.db").exists()


@pytest.mark.parametrize(("content", "expect"), [
    ("not json at all", "is not a tuner report (not JSON: Expecting value at line 1)"),
    ('{"schema_version": 1}', "problems, first at target: Field required)"),
    ("[1, 2, 3]", "is not a tuner report (not a report's structure"),
    ('{"recommendations": [1]}', "is not a tuner report (not a report's structure"),
    (json.dumps({**json.loads(to_json(keep_report())), "session": "x"}), "is not a tuner report (1 problem, "
                                                                          "first at session"),
])
def test_export_of_a_file_that_is_not_a_report_is_one_sentence(tmp_path: Path, content: str, expect: str) -> None:
    src = tmp_path / "report.json"
    src.write_text(content)
    _one_sentence(_cli("--format", "conf", "--from", str(src), state=tmp_path), expect)


def test_export_of_a_missing_or_unreadable_file_is_one_sentence(tmp_path: Path) -> None:
    _one_sentence(_cli("--format", "conf", "--from", str(tmp_path / "gone.json"), state=tmp_path), "no such file")
    _one_sentence(_cli("--format", "conf", "--from", str(tmp_path), state=tmp_path), "is a directory")
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe\x00")
    _one_sentence(_cli("--format", "conf", "--from", str(tmp_path / "bin.json"), state=tmp_path), "not UTF-8")


def test_export_into_a_directory_that_cannot_be_written_is_one_sentence(tmp_path: Path) -> None:
    src = tmp_path / "report.json"
    src.write_text(to_json(change_report()))
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    r = _cli("--format", "ansible", "--from", str(src), "--output", str(blocker / "out"), state=tmp_path)
    _one_sentence(r, f"cannot write into {blocker / 'out'}: Not a directory")  # checked before any file
    r = _cli("--format", "conf", "--from", str(src), "--output", str(blocker), state=tmp_path)
    assert r.exit_code == 2 and "is a file" in r.output and "Traceback" not in r.output


def test_export_needs_a_known_format(tmp_path: Path) -> None:
    for args in ([], ["--format", "yaml"], ["--format", "host"]):
        r = _cli(*args, state=tmp_path)
        assert r.exit_code == 2 and r.output.startswith("tuner: error: ") and "Traceback" not in r.output


def test_a_stored_session_exports_like_the_same_report_from_a_file(tmp_path: Path) -> None:
    a = stored_report("a1aaaaaaaaaa")
    save(tmp_path / "tuner.db", a)
    src = tmp_path / "report.json"
    src.write_text(to_json(a))
    for fmt in NEW:
        assert _cli("--format", fmt, "--from", "a1", state=tmp_path).stdout == \
            _cli("--format", fmt, "--from", str(src), state=tmp_path).stdout

