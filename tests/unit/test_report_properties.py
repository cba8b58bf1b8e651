"""Issue #44: every registered format stays safe whatever report it is given. Hypothesis builds hostile reports —
knob names from the catalogue and beyond it (archive_command, case variants), values of every type, device match
dicts with PROGRAM and IMPORT{program} keys, tablespace names, sources and session fields full of newlines, quotes
and shell, udev, YAML and SQL metacharacters — and for every format in tuner.emit's registry either the render
is refused with one ReportError sentence, or the output read by its consumer says exactly what the report meant:
PostgreSQL's own parser (pglast) finds only tuner's statements with the report's names and values, YAML and JSON
load as the report's settings and nothing more, a udev rule has only the allow-listed keys, a shell script only
tuner's commands. Derandomised, so a run on a loaded machine finds the same examples as any other."""

from __future__ import annotations

import configparser
import json
import re
from datetime import UTC, datetime
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.test_hostile_output import _raw_unsafe, _statements, _udev_tokens, _UnsafeLoader, _value
from tuner import emit
from tuner.knobs import catalog
from tuner.hostfacts.blockdev import MATCH_KEYS, MATCH_SHAPES
from tuner.report.model import DeviceRef, EffectOut, Recommendation, Report, SessionOut, TargetOut
from tuner.report.validate import SOURCES, ReportError, check

T0 = datetime(2026, 12, 2, 12, 0, 0, tzinfo=UTC)
CAT = catalog.load()
KNOBS = CAT.reported_names()
EFFECT = EffectOut(metric="execution_time_ms", improvement=1.5, ci95=(1.2, 1.9), decision_ci=(1.1, 2.0), n_pairs=6,
                   p_value=0.01, looks=1, method="t")
VERSIONS = (130014, 150018, 170006, 180006)
# Fragments that mean something to a consumer: SQL, psql, shell, udev, YAML, Jinja, tuned, conf files, terminals.
METAS = ["\n", "\r", "'", '"', "\\", ";", "--", "/*", "$(", "`", "|", "*", "?", "[", "{{", "}}", "${", "%", ":",
         "#", "&", "\x00", "\x1b[2J", "\u2028", "\u202e", "!unsafe ", "- ", "=", "==", "+=", ",", "PROGRAM",
         "RUN", "IMPORT{program}", "DROP DATABASE prod", "archive_command", "\\! reboot", "E'", "U&\"", "<script>"]
HOSTILE_TEXT = st.one_of(st.sampled_from(METAS),
                         st.lists(st.one_of(st.sampled_from(METAS), st.text(max_size=6)), min_size=1,
                                  max_size=5).map("".join),
                         st.text(max_size=20))
UNSAFE_CATEGORIES = ("Cc", "Cf", "Cs", "Zl", "Zp")
# Text an outside name may hold and still pass the check: everything but control and format characters, with the
# metacharacters above made likely.
SAFE_TEXT = st.lists(st.one_of(st.sampled_from([m for m in METAS if not _raw_unsafe(m, allowed="")]),
                               st.text(st.characters(blacklist_categories=UNSAFE_CATEGORIES), min_size=1, max_size=6)),
                     min_size=1, max_size=4).map("".join)
DEVICE_NAMES = ["sdb", "nvme0n1", "loop3", "dm-0", "cciss!c0d0", "vdc"]
DANGEROUS = ["archive_command", "ssl_passphrase_command", "shared_preload_libraries", "listen_addresses", "fsync",
             "Effective_IO_Concurrency", "work_mem", "effective_io_concurrency\narchive_command"]


def _good_value(spec: catalog.KnobSpec) -> st.SearchStrategy[int | str]:
    if spec.kind == "enum":
        return st.sampled_from(spec.values or ("off",))
    return st.integers(spec.min if spec.min is not None else -10, spec.max if spec.max is not None else 10)


@st.composite
def device_ref(draw: Any) -> DeviceRef:
    """A device as discovery names it: one of its match shapes, values of outside text."""
    name = draw(st.sampled_from(DEVICE_NAMES))
    keys = draw(st.sampled_from(MATCH_SHAPES))
    match = {k: draw(SAFE_TEXT) for k in sorted(keys)}
    if "KERNEL" in match:
        match["KERNEL"] = "loop*" if len(match) > 1 else name
    return DeviceRef(node=f"/dev/{name}", name=name, sysfs_path=f"/sys/block/{name}/queue/read_ahead_kb", match=match)


@st.composite
def recommendation(draw: Any, version: int) -> Recommendation:
    """A recommendation tuner could have written on a server of ``version``: outside text in its names."""
    scope = draw(st.sampled_from(["system", "tablespace", "device"]))  # each scope as likely as the others
    knob = draw(st.sampled_from([k for k in KNOBS if scope in getattr(CAT.reported(k, version), "scopes", ())]))
    spec = CAT.reported(knob, version)
    assert spec is not None
    device = draw(device_ref()) if scope == "device" else None
    obj = device.node if device else draw(SAFE_TEXT) if scope == "tablespace" else None
    return Recommendation(
        knob=knob, scope=scope, object=obj, current=draw(_good_value(spec)), recommended=draw(_good_value(spec)),
        source=draw(st.sampled_from(sorted(SOURCES))), near_optimal=None,
        decision=draw(st.sampled_from(["change", "change", "keep"])), reason=draw(HOSTILE_TEXT), effect=EFFECT,
        requires=spec.requires, run_on={"device": "host", "tablespace": "primary"}.get(scope, "target"),
        device=device, together_with=draw(st.lists(st.sampled_from(KNOBS), max_size=2)))


def _mutations(draw: Any, rec: Recommendation) -> dict[str, Any]:
    """One way a report file or a stored row could have been tampered with."""
    dev = rec.device or DeviceRef(node="/dev/sdb", name="sdb", sysfs_path="/sys/block/sdb/queue/read_ahead_kb",
                                  match={"ATTR{serial}": "x"})
    kind = draw(st.sampled_from(["knob", "knob-text", "value", "value-type", "match-key", "match-value", "node",
                                 "scope", "object", "source", "together"]))
    return {
        "knob": lambda: {"knob": draw(st.sampled_from(DANGEROUS))},
        "knob-text": lambda: {"knob": draw(HOSTILE_TEXT)},
        "value": lambda: {"recommended": draw(st.one_of(st.integers(-2**40, 2**40), HOSTILE_TEXT))},
        "value-type": lambda: {"current": draw(st.one_of(st.booleans(), st.just("1"), HOSTILE_TEXT))},
        "match-key": lambda: {"scope": "device", "object": dev.node, "device": dev.model_copy(update={"match": {
            draw(st.sampled_from(["PROGRAM", "IMPORT{program}", "RUN", "RUN{program}", "NAME", "ENV{X}"])):
                draw(SAFE_TEXT),
            **draw(st.dictionaries(st.sampled_from(sorted(MATCH_KEYS)), SAFE_TEXT, max_size=1))}})},
        "match-value": lambda: {"device": dev.model_copy(update={"match": {k: draw(HOSTILE_TEXT) + "\n"
                                                                          for k in dev.match}})},
        "node": lambda: {"device": dev.model_copy(update={"node": draw(HOSTILE_TEXT)})},
        "scope": lambda: {"scope": draw(st.sampled_from(["system", "tablespace", "device"])), "device": dev},
        "object": lambda: {"object": draw(HOSTILE_TEXT) + "\r"},
        "source": lambda: {"source": draw(HOSTILE_TEXT) + "\n"},
        "together": lambda: {"together_with": [draw(st.sampled_from(DANGEROUS))]},
    }[kind]()


@st.composite
def report(draw: Any) -> Report:
    """A report tuner could have written, tampered with one way or another about half the time."""
    version = draw(st.sampled_from(VERSIONS))
    recs = draw(st.lists(recommendation(version), min_size=1, max_size=5,
                         unique_by=lambda r: (r.knob, r.scope, r.object)))
    word = st.one_of(st.sampled_from(["h1", "6.18", "default", "hot_standby", "15.18"]), SAFE_TEXT)
    fields: dict[str, Any] = {"schema_version": 1, "host": draw(word), "kernel": draw(word), "id": "3f2a91c0d7e4"}
    tamper = draw(st.sampled_from(["none", "none", "none", "rec", "rec", "duplicate", "schema", "session"]))
    if tamper == "rec":
        i = draw(st.integers(0, len(recs) - 1))
        recs[i] = Recommendation.model_validate(recs[i].model_dump() | _mutations(draw, recs[i]))
    elif tamper == "duplicate":
        recs.append(recs[0].model_copy(update={"recommended": recs[-1].recommended}))
    elif tamper == "schema":
        fields["schema_version"] = draw(st.integers(-3, 100).filter(lambda v: v != 1))
    elif tamper == "session":
        fields[draw(st.sampled_from(["host", "kernel", "id"]))] = draw(HOSTILE_TEXT) + "\n"
    return Report(
        schema_version=fields["schema_version"],
        target=TargetOut(server_version_num=version, server_version=draw(word), in_recovery=True,
                         system_identifier=draw(word), mode=draw(word), dsn=draw(word), sandbox=False),
        session=SessionOut(id=fields["id"], started_at=T0, duration_s=1.0, probes=2, policy=draw(word), seed=1,
                           cache=draw(word), host=fields["host"], kernel=fields["kernel"]),
        families=[], recommendations=recs, trials=[])


# -- what each consumer reads ---------------------------------------------------------------------------------

def _changes(rep: Report, scope: str) -> list[Recommendation]:
    return [r for r in rep.recommendations if r.decision == "change" and r.scope == scope]


def _sql(rep: Report, text: str) -> None:
    system = {(r.knob, r.recommended) for r in _changes(rep, "system")}
    tablespaces = {(r.object, r.knob, r.recommended) for r in _changes(rep, "tablespace")
                   if r.object and len(r.object.encode()) <= 63}
    seen_system, seen_ts = set(), set()
    for stmt in _statements(text):
        name = type(stmt).__name__
        if name == "SelectStmt":
            assert stmt.targetList[0].val.funcname[0].sval == "pg_reload_conf" and not stmt.fromClause
        elif name == "AlterSystemStmt":
            seen_system.add((stmt.setstmt.name, _value(stmt.setstmt.args[0])))
        else:
            assert name == "AlterTableSpaceOptionsStmt", name
            (opt,) = stmt.options
            seen_ts.add((stmt.tablespacename, opt.defname, _value(opt.arg)))
    assert seen_system == system and seen_ts == tablespaces


def _parameters(rep: Report, doc: Any) -> None:
    params = (doc["spec"] if "spec" in doc else doc)["postgresql"]["parameters"]
    want = {r.knob: str(r.recommended) for r in _changes(rep, "system")}
    assert set(params.items()) <= set(want.items()), (params, want)  # managed ones are refused, never others


def _udev(rep: Report, text: str) -> None:
    devices = {r.device.node: r for r in _changes(rep, "device") if r.device is not None}
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        tokens = _udev_tokens(line)
        assert tokens[:2] == [("ACTION", "==", "add|change"), ("SUBSYSTEM", "==", "block")]
        key, op, value = tokens[-1]
        assert (key, op) == ("ATTR{queue/read_ahead_kb}", "=") and value.isdigit()
        assert all(k in MATCH_KEYS and o == "==" for k, o, _ in tokens[2:-1]), tokens
        assert any({k for k, _, _ in tokens[2:-1]} == set(r.device.match) for r in devices.values()
                   if r.device is not None)


SCRIPT_LINE = re.compile(r"#!/bin/sh|set -e|blockdev --setra [0-9]+ /dev/[A-Za-z0-9._/!:+-]+|"
                         r"rm -f /etc/udev/rules\.d/99-tuner-readahead\.rules|udevadm control --reload-rules && "
                         r"udevadm trigger --action=change --subsystem-match=block"
                         r"( --sysname-match=([A-Za-z0-9._:+-]+|'[A-Za-z0-9._:!+-]+'))+")


def _consumers(rep: Report, fmt: str, files: dict[str, str]) -> None:
    for name, text in files.items():
        assert not _raw_unsafe(text), (fmt, name)
        if name.endswith(".sql"):
            if not name.startswith("rollback"):
                _sql(rep, text)
            else:
                assert all(type(s).__name__ in {"AlterSystemStmt", "AlterTableSpaceOptionsStmt", "SelectStmt"}
                           for s in _statements(text))
        elif name.endswith(".json"):
            doc = json.loads(text)
            if fmt == "json":
                assert [r["knob"] for r in doc["recommendations"]] == [r.knob for r in rep.recommendations]
            elif not name.startswith("rollback"):
                _parameters(rep, doc)
        elif name.endswith((".yaml", ".yml")):
            doc = yaml.load(text, Loader=_UnsafeLoader)  # noqa: S506 - SafeLoader plus Ansible's !unsafe
            if fmt == "ansible" and name.endswith("tuner-vars.yml"):
                want = {r.knob for r in _changes(rep, "system")}
                assert {s["name"] for s in doc["tuner_settings"]} <= want
                assert {t["tablespace"] for t in doc["tuner_tablespaces"]} <= {r.object for r in
                                                                                _changes(rep, "tablespace")}
            elif fmt in ("patroni", "cnpg", "zalando") and not name.startswith("rollback"):
                _parameters(rep, doc)
        elif name.endswith(".rules"):
            _udev(rep, text)
        elif name.endswith(".sh"):
            assert all(line.startswith("# ") or SCRIPT_LINE.fullmatch(line) for line in text.splitlines() if line)
        elif name.endswith("tuned.conf"):
            parser = configparser.ConfigParser(interpolation=None)
            parser.read_string(text)
            options = {o for s in parser.sections() for o in parser.options(s)}
            assert options <= {"summary", "include", "type", "priority", "devices_udev_regex", "devices",
                               "readahead"}, options
            names = {r.device.name for r in _changes(rep, "device") if r.device is not None}
            assert all(parser[s]["devices"] in names for s in parser.sections() if "devices" in parser[s])
        elif name.endswith(".conf"):
            for line in text.splitlines():
                if line and not line.startswith("# "):
                    knob, _, value = line.partition(" = ")
                    assert knob in KNOBS and value.strip("'") != "", line


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(report())
def test_every_format_refuses_or_writes_exactly_what_the_report_means(rep: Report) -> None:
    try:
        check(rep)
        passed = True
    except ReportError as exc:
        passed = False
        sentence = str(exc)
        assert "\n" not in sentence and sentence.startswith("the report cannot be used: ") and exc.hint
    for fmt in emit.EMITTERS:
        if not passed:
            try:
                emit.render(rep, fmt)
            except ReportError as exc:
                assert str(exc) == sentence  # the same one sentence from every format
            else:
                raise AssertionError(f"{fmt} rendered a report the check refuses")
            continue
        _consumers(rep, fmt, emit.render(rep, fmt))


@settings(max_examples=200, deadline=None, derandomize=True)
@given(report())
def test_a_report_that_passes_has_only_catalogue_knobs_with_their_own_values(rep: Report) -> None:
    try:
        check(rep)
    except ReportError:
        return
    assert rep.schema_version == 1
    keys = [(r.knob, r.scope, r.object) for r in rep.recommendations]
    assert len(keys) == len(set(keys))
    for r in rep.recommendations:
        spec = CAT.reported(r.knob, rep.target.server_version_num)
        assert spec is not None and r.scope in spec.scopes
        for v in (r.current, r.recommended):
            assert v in (spec.values or ()) if spec.kind == "enum" else isinstance(v, int)
        if r.device is not None:
            assert frozenset(r.device.match) in MATCH_SHAPES and r.scope == "device"
