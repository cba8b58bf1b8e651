"""Issue #36: each config-management format, fed to its real consumer.

- conf: a PostgreSQL 15 server whose include_dir is the output loads it (pg_file_settings, then pg_reload_conf()
  and pg_settings), its rollback twin puts today's values back, and values from outside read back as themselves.
- ansible: ansible-playbook (with its bundled community.postgresql and psycopg2) against the same server: syntax
  check, check mode that changes nothing, a run that changes exactly the recommended settings (and a tablespace's
  option, on a tablespace whose name would be a Jinja template if it were rendered), a second run that changes
  nothing, a rollback that restores and is idempotent too. The readahead task writes into a temporary rules
  directory and triggers nothing; the host's udev rules are never touched.
- patroni: the YAML merged into a sample patroni.yml passes `patroni --validate-config`, and Patroni's own
  parameter validators accept every value for the server's version.

Every export goes through the command line (`tuner export --from report.json --output DIR`).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.test_hostile_output import CORPUS
from tuner.emit import ansible as ansible_emit
from tuner.emit import quote
from tuner.emit.json import to_json
from tuner.report.model import DeviceRef, EffectOut, Recommendation, Report, SessionOut, TargetOut
from tuner.sandbox import Binaries

from .conftest import PG15_BIN, StoreServer, wait_for

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
T0 = datetime(2026, 12, 2, 12, 0, 0, tzinfo=UTC)
EFFECT = EffectOut(metric="execution_time_ms", improvement=3.1, ci95=(2.8, 3.4), decision_ci=(2.6, 3.6), n_pairs=6,
                   p_value=0.001, looks=1, method="t")
# A tablespace name that Ansible would render as a template, running a command, if tuner wrote it untagged; with
# quotes of both kinds for the SQL and YAML around it (41 bytes: a PostgreSQL name holds 63). A line break in a
# name is refused before any format is written (tuner.report.validate, issue #44; tests/unit/test_report_check.py).
HOSTILE_TS = "x'\"{{ lookup('pipe', 'touch INJECTED') }}"
SETTINGS = ("effective_io_concurrency", "commit_delay", "wal_compression", "wal_buffers")


def _rec(**kw: Any) -> Recommendation:
    base: dict[str, Any] = dict(knob="effective_io_concurrency", scope="system", object=None, current=1,
                                recommended=256, source="default", near_optimal=(64, 1000), decision="change",
                                reason="measured", effect=EFFECT, requires="reload")
    return Recommendation.model_validate(base | kw)


def make_report(*recs: Recommendation) -> Report:
    return Report(
        target=TargetOut(server_version_num=150018, server_version="15.18", in_recovery=True, system_identifier="7",
                         mode="hot_standby", dsn="host=staging", sandbox=False),
        session=SessionOut(id="c0ffee123456", started_at=T0, duration_s=42.0, probes=30, policy="default", seed=1,
                           cache="cold", host="staging1", kernel="6.18"),
        families=[], recommendations=list(recs), trials=[])


def export(fmt: str, rep: Report, tmp: Path) -> Path:
    """``tuner export --format fmt --from report.json --output DIR``, as an operator runs it."""
    src, out = tmp / f"report-{fmt}.json", tmp / f"out-{fmt}"
    src.write_text(to_json(rep))
    proc = subprocess.run([sys.executable, "-m", "tuner", "export", "--format", fmt, "--from", str(src),
                           "--output", str(out)], capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO),
                               "TUNER_TUNER__STATE_DIR": str(tmp / "state")})
    assert proc.returncode == 0, proc.stderr
    return out


class Server(StoreServer):
    """The consumers' PostgreSQL 15: its postgresql.conf includes ``conf.d`` beside the data directory."""

    def __init__(self, pg15: Binaries) -> None:
        super().__init__(pg15)
        self.conf_d = self.dir / "conf.d"
        self.conf_d.mkdir()
        with (self.data / "postgresql.conf").open("a") as fh:
            fh.write(f"include_dir = '{self.conf_d}'\n")
        self.ts_dir = self.dir / "ts"
        self.ts_dir.mkdir()
        os.chown(self.ts_dir, self.data.stat().st_uid, self.data.stat().st_gid)
        self.sql("postgres", "SELECT pg_reload_conf()")

    def q(self, statement: str) -> list[Any]:
        return list(self.sql("postgres", statement))

    def settings(self) -> dict[str, tuple[str, str]]:
        return {r["name"]: (r["setting"], r["source"]) for r in self.q("SELECT name, setting, source FROM pg_settings")}

    def reload_until(self, want: dict[str, str]) -> None:
        """pg_reload_conf() and wait until new connections see ``want`` (the postmaster rereads asynchronously)."""
        self.q("SELECT pg_reload_conf()")
        ok = wait_for(lambda: all(self.settings()[k][0] == v for k, v in want.items()), 15)
        assert ok, {k: self.settings()[k] for k in want}

    def clean(self) -> None:
        for f in self.conf_d.iterdir():
            f.unlink()
        self.q("ALTER SYSTEM RESET ALL")
        for row in self.q("SELECT spcname FROM pg_tablespace WHERE spcoptions IS NOT NULL"):
            self.q(f"ALTER TABLESPACE {quote.ident(row['spcname'])} RESET (effective_io_concurrency)")
        self.reload_until({"effective_io_concurrency": "1", "commit_delay": "0", "wal_compression": "off"})


@pytest.fixture(scope="module")
def server(pg15: Binaries) -> Iterator[Server]:
    s = Server(pg15)
    try:
        yield s
    finally:
        s.remove()


@pytest.fixture
def pg(server: Server) -> Iterator[Server]:
    server.clean()
    yield server
    server.clean()


# -- conf ---------------------------------------------------------------------------------------------------------

def test_include_dir_loads_the_conf_file_and_its_rollback_puts_todays_values_back(pg: Server, tmp_path: Path) -> None:
    rep = make_report(
        _rec(),
        _rec(knob="commit_delay", current=0, recommended=100),
        _rec(knob="wal_compression", current="off", recommended="lz4", source="configuration file"),
        _rec(scope="tablespace", object="fast", recommended=64, source="server", run_on="primary"),
    )
    out = export("conf", rep, tmp_path)
    (pg.conf_d / "99-tuner.conf").write_text((out / "conf.d/99-tuner.conf").read_text())
    rows = pg.q("SELECT name, setting, error FROM pg_file_settings WHERE sourcefile LIKE '%/99-tuner.conf'")
    assert {(r["name"], r["setting"]) for r in rows} == {
        ("effective_io_concurrency", "256"), ("commit_delay", "100"), ("wal_compression", "lz4")}
    assert [r["error"] for r in rows] == [None] * 3
    pg.reload_until({"effective_io_concurrency": "256", "commit_delay": "100", "wal_compression": "lz4"})
    assert pg.settings()["wal_compression"] == ("lz4", "configuration file")

    (pg.conf_d / "99-tuner.conf").write_text((out / "rollback/conf.d/99-tuner.conf").read_text())
    rows = pg.q("SELECT name, setting, error FROM pg_file_settings WHERE sourcefile LIKE '%/99-tuner.conf'")
    assert [(r["name"], r["setting"], r["error"]) for r in rows] == [("wal_compression", "off", None)]
    pg.reload_until({"effective_io_concurrency": "1", "commit_delay": "0", "wal_compression": "off"})
    after = pg.settings()
    assert after["effective_io_concurrency"][1] == after["commit_delay"][1] == "default"


def test_values_from_outside_read_back_from_a_conf_file_as_themselves(pg: Server) -> None:
    values = [s for s in CORPUS if quote.attempt(lambda s=s: quote.conf_value(s))[0] is not None]
    assert len(values) >= len(CORPUS) - 3  # only NUL and undecodable text are refused
    lines = [f"tunertest.v{i} = {quote.conf_value(v)}" for i, v in enumerate(values)]
    (pg.conf_d / "50-values.conf").write_text("\n".join(lines) + "\n")
    rows = pg.q("SELECT name, setting, error FROM pg_file_settings WHERE sourcefile LIKE '%/50-values.conf' "
                "ORDER BY seqno")
    assert [r["error"] for r in rows] == [None] * len(values)
    assert [r["setting"] for r in rows] == values


# -- ansible ------------------------------------------------------------------------------------------------------

def _playbook(directory: Path, pg: Server, tmp: Path, *extra: str) -> str:
    env = {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(tmp), "LC_ALL": "C.UTF-8", "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_HOME": str(tmp / "ansible-home"), "ANSIBLE_LOCAL_TEMP": str(tmp / "ansible-tmp"),
           "ANSIBLE_RETRY_FILES_ENABLED": "0", "PYTHONWARNINGS": "ignore"}
    args = [str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", "-e", "tuner_hosts=localhost",
            "-e", f"ansible_python_interpreter={sys.executable}", "-e", f"tuner_login_unix_socket={pg.dir}",
            "-e", f"tuner_login_port={pg.port}", "-e", f"tuner_udev_rules_dir={tmp / 'rules.d'}",
            "-e", "tuner_udev_trigger=false", *extra, "tuner.yml"]
    proc = subprocess.run(args, cwd=directory, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert not (directory / "INJECTED").exists() and not (tmp / "INJECTED").exists()
    return proc.stdout


def _changed(stdout: str) -> int:
    recap = re.search(r"localhost\s+:\s+ok=\d+\s+changed=(\d+)\s+unreachable=0\s+failed=0", stdout)
    assert recap, stdout[-2000:]
    return int(recap.group(1))


def _auto_conf(pg: Server) -> dict[str, str]:
    return {r["name"]: r["setting"] for r in pg.q(
        "SELECT name, setting FROM pg_file_settings WHERE sourcefile LIKE '%/postgresql.auto.conf'")}


def _spcoptions(pg: Server, name: str) -> Any:
    return pg.q(f"SELECT spcoptions FROM pg_tablespace WHERE spcname = {quote.literal(name)}")[0]["spcoptions"]


def test_the_ansible_playbook_changes_exactly_the_recommendation_once_and_its_rollback_restores(
        pg: Server, tmp_path: Path) -> None:
    pg.q(f"CREATE TABLESPACE {quote.ident(HOSTILE_TS)} LOCATION {quote.literal(str(pg.ts_dir))}")
    try:
        device = DeviceRef(node="/dev/sdz", name="sdz", sysfs_path="/sys/block/sdz/queue/read_ahead_kb",
                           match={"ATTRS{wwid}": "naa.5000c500a0b1c2d3"})
        rep = make_report(
            _rec(),
            _rec(knob="commit_delay", current=0, recommended=100),
            _rec(knob="wal_compression", current="off", recommended="lz4", source="configuration file"),
            _rec(knob="wal_buffers", current=-1, recommended=2048, requires="restart"),
            _rec(scope="tablespace", object=HOSTILE_TS, recommended=64, source="server", run_on="primary"),
            _rec(knob="read_ahead_kb", scope="device", object="/dev/sdz", current=128, recommended=512,
                 source="kernel", requires="reopen", run_on="host", device=device),
            _rec(knob="wal_writer_delay", current=200, recommended=1000, decision="keep"),
        )
        out = export("ansible", rep, tmp_path)
        udev_out = export("udev", rep, tmp_path)
        apply_dir, rollback_dir = out / "ansible", out / "rollback/ansible"
        for d in (apply_dir, rollback_dir):
            _playbook(d, pg, tmp_path, "--syntax-check")
        before, auto_before = pg.settings(), _auto_conf(pg)
        (tmp_path / "rules.d").mkdir()  # the host's /etc/udev/rules.d, never touched by a test
        rules = tmp_path / "rules.d" / "99-tuner-readahead.rules"

        checked = _playbook(apply_dir, pg, tmp_path, "--check", "--diff")
        assert _changed(checked) > 0 and "PostgreSQL must restart for wal_buffers" in checked
        assert _auto_conf(pg) == auto_before and _spcoptions(pg, HOSTILE_TS) is None and not rules.exists()

        first = _playbook(apply_dir, pg, tmp_path)
        assert _changed(first) > 0 and "PostgreSQL must restart for wal_buffers" in first
        assert _auto_conf(pg) == {"effective_io_concurrency": "256", "commit_delay": "100",
                                  "wal_compression": "lz4", "wal_buffers": "2048"}
        pg.reload_until({"effective_io_concurrency": "256", "commit_delay": "100", "wal_compression": "lz4"})
        now = pg.settings()
        assert {k for k in before if now[k] != before[k]} == {"effective_io_concurrency", "commit_delay",
                                                             "wal_compression"}
        assert pg.q("SELECT pending_restart FROM pg_settings WHERE name = 'wal_buffers'")[0]["pending_restart"]
        assert _spcoptions(pg, HOSTILE_TS) == ["effective_io_concurrency=64"]
        assert rules.read_text() == (udev_out / "udev/99-tuner-readahead.rules").read_text()
        assert 'ATTRS{wwid}=="naa.5000c500a0b1c2d3", ATTR{queue/read_ahead_kb}="512"' in rules.read_text()

        assert _changed(_playbook(apply_dir, pg, tmp_path)) == 0  # idempotent: everything "ok"

        assert _changed(_playbook(rollback_dir, pg, tmp_path)) > 0
        assert _auto_conf(pg) == {"wal_compression": "off"}  # today's value came from a configuration file
        pg.reload_until({"effective_io_concurrency": "1", "commit_delay": "0", "wal_compression": "off"})
        after = pg.settings()
        assert {k for k in SETTINGS if after[k][0] != before[k][0]} == set()
        assert after["effective_io_concurrency"][1] == after["commit_delay"][1] == "default"
        assert _spcoptions(pg, HOSTILE_TS) is None
        assert rules.read_text() == (udev_out / "rollback/udev/99-tuner-readahead.rules").read_text()
        assert _changed(_playbook(rollback_dir, pg, tmp_path)) == 0
    finally:
        pg.q(f"DROP TABLESPACE {quote.ident(HOSTILE_TS)}")


def _ansible_env(tmp: Path) -> dict[str, str]:
    return {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(tmp), "LC_ALL": "C.UTF-8", "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_HOME": str(tmp / "ansible-home"), "ANSIBLE_LOCAL_TEMP": str(tmp / "ansible-tmp"),
            "ANSIBLE_RETRY_FILES_ENABLED": "0", "PYTHONWARNINGS": "ignore"}


def _plays(listing: str) -> list[tuple[str, list[str]]]:
    """``ansible-playbook --list-hosts`` output as (play's pattern, its hosts), play by play."""
    plays: list[tuple[str, list[str]]] = []
    for line in listing.splitlines():
        if m := re.match(r"\s+pattern: \[(.*)\]$", line):
            plays.append((m.group(1).strip("'"), []))
        elif plays and re.match(r"\s{6}\S+$", line):
            plays[-1][1].append(line.strip())
    return plays


def test_the_example_playbooks_match_hosts_of_the_shipped_inventory(tmp_path: Path) -> None:
    """Issue #47: examples/ansible-from-report.yml once targeted a group the inventory does not have (Ansible
    warns and does nothing). Both playbooks, listed against examples/tuner-export-inventory.yml, find its hosts;
    the exported one first, in its sorting play (the standbys' and the primary's plays take the groups it makes,
    which exist only once it has run)."""
    inventory = REPO / "examples" / "tuner-export-inventory.yml"
    report = tmp_path / "report.json"
    report.write_text(to_json(make_report(_rec())))
    out = export("ansible", make_report(_rec(), _rec(knob="wal_buffers", current=-1, recommended=2048,
                                                     requires="restart")), tmp_path)
    hosts = ["db1.example.internal", "db2.example.internal"]
    for playbook in (REPO / "examples" / "ansible-from-report.yml", out / "ansible" / "tuner.yml"):
        for mode in ("--syntax-check", "--list-hosts"):
            proc = subprocess.run([str(BIN / "ansible-playbook"), "-i", str(inventory), mode, "-e", f"report={report}",
                                   str(playbook)], cwd=tmp_path, env=_ansible_env(tmp_path), capture_output=True,
                                  text=True, timeout=300)
            assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        plays = _plays(proc.stdout)
        assert sorted(plays[0][1]) == hosts, proc.stdout
        if playbook.name == "tuner.yml":
            assert [p for p, _ in plays] == ["postgresql", "tuner_standbys:tuner_primaries"], proc.stdout


def test_one_play_over_the_sorted_groups_runs_the_standbys_batches_before_the_primarys(tmp_path: Path) -> None:
    """The exported playbook's one play takes ``tuner_standbys:tuner_primaries`` with ``serial``: Ansible itself
    decides the order of the batches. A primary listed first in the inventory still comes last."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {
        "p1": {"standby": False}, "s1": {"standby": True}, "s2": {"standby": True}},
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}))
    play = ansible_emit.playbook(make_report(_rec()))[1]
    probe = [{"hosts": "all", "gather_facts": False, "tasks": [{"ansible.builtin.group_by": {
        "key": "{{ 'tuner_standbys' if standby else 'tuner_primaries' }}"}}]},
        {"hosts": play["hosts"], "serial": 1, "gather_facts": False,
         "tasks": [{"ansible.builtin.debug": {"msg": "batch {{ inventory_hostname }}"}}]}]
    book = tmp_path / "order.yml"
    book.write_text(yaml.safe_dump(probe))
    proc = subprocess.run([str(BIN / "ansible-playbook"), "-i", str(inventory), str(book)], cwd=tmp_path,
                          env=_ansible_env(tmp_path), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # Within a group the hosts come in the order group_by put them there, which parallel forks decide (s2 before
    # s1 in a clean clone's run): what the play promises is every standby's batch before the primary's.
    batches = re.findall(r'"msg": "batch (\w+)"', proc.stdout)
    assert sorted(batches[:2]) == ["s1", "s2"] and batches[2:] == ["p1"], proc.stdout


# -- patroni ------------------------------------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _patroni_yml(tmp: Path) -> dict[str, Any]:
    """A sample patroni.yml. Kubernetes as the DCS: validation connects to nothing (an etcd entry would have to be
    reachable); connect addresses from TEST-NET-1 (RFC 5737), which validation only parses."""
    data_dir = tmp / "pgdata"
    data_dir.mkdir(mode=0o700)
    return {
        "scope": "demo", "name": "node1",
        "restapi": {"listen": f"127.0.0.1:{_free_port()}", "connect_address": "192.0.2.10:8008"},
        "kubernetes": {"labels": {"application": "patroni"}},
        "bootstrap": {"dcs": {"ttl": 30, "loop_wait": 10, "postgresql": {"parameters": {"max_connections": 100}}}},
        "postgresql": {
            "listen": f"127.0.0.1:{_free_port()}", "connect_address": "192.0.2.10:5432",
            "data_dir": str(data_dir), "bin_dir": str(PG15_BIN),
            "authentication": {"superuser": {"username": "postgres", "password": "x"},
                               "replication": {"username": "replicator", "password": "x"}},
            "parameters": {"unix_socket_directories": str(tmp)},
        },
    }


def _validate(config: dict[str, Any], path: Path) -> subprocess.CompletedProcess[str]:
    path.write_text(yaml.safe_dump(config))
    return subprocess.run([str(BIN / "patroni"), "--validate-config", str(path)], capture_output=True, text=True,
                          timeout=120, env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"})


def test_patroni_accepts_the_dynamic_configuration_merged_into_patroni_yml(server: Server, tmp_path: Path) -> None:
    from patroni.collections import CaseInsensitiveSet
    from patroni.postgresql.validator import transform_postgresql_parameter_value
    from patroni.utils import patch_config

    rep = make_report(
        _rec(),
        _rec(knob="wal_compression", current="off", recommended="lz4", source="configuration file"),
        _rec(knob="wal_buffers", current=-1, recommended=2048, requires="restart"),
        _rec(scope="tablespace", object="fast", recommended=64, source="server", run_on="primary"),
    )
    out = export("patroni", rep, tmp_path)
    patch = yaml.safe_load((out / "patroni/patroni-config.yaml").read_text())
    assert patch == json.loads((out / "patroni/patch-config.json").read_text())
    params = patch["postgresql"]["parameters"]
    assert params == {"effective_io_concurrency": "256", "wal_compression": "lz4", "wal_buffers": "2048"}
    # (a setting Patroni manages, such as port, is not a knob of tuner's: the report check refuses it before
    # this format is written, and the emitter's own refusal is tested in tests/unit/test_emit_formats.py)
    assert set(patch) == {"postgresql"}  # no key of tuner's own in what becomes the cluster's dynamic config
    assert "pending_restart after it: wal_buffers" in (out / "patroni/patroni-config.yaml").read_text()

    config = _patroni_yml(tmp_path)
    patch_config(config["bootstrap"]["dcs"], patch)  # Patroni's own merge, as edit-config --apply and PATCH do
    patch_config(config["postgresql"], patch["postgresql"])
    proc = _validate(config, tmp_path / "patroni.yml")
    assert proc.returncode == 0, proc.stdout + proc.stderr

    rollback = yaml.safe_load((out / "rollback/patroni/patroni-config.yaml").read_text())
    assert rollback == {"postgresql": {"parameters": {"effective_io_concurrency": None, "wal_compression": "off",
                                                      "wal_buffers": None}}}
    patch_config(config["bootstrap"]["dcs"], rollback)
    assert config["bootstrap"]["dcs"]["postgresql"]["parameters"] == {"max_connections": 100, "wal_compression": "off"}

    # Patroni's validators for the server's own settings accept every value as it is (none is dropped).
    gucs = CaseInsensitiveSet(r["name"] for r in server.q("SELECT name FROM pg_settings"))
    for name, value in params.items():
        assert transform_postgresql_parameter_value(150000, name, value, gucs) is not None, name

    # ... and the validator is awake: a parameters section that is not a mapping fails it.
    config["bootstrap"]["dcs"]["postgresql"]["parameters"] = ["effective_io_concurrency=256"]
    assert _validate(config, tmp_path / "bad.yml").returncode != 0
