"""A corpus of hostile inputs — configurations, policies, DSNs, command-line values, environment variables — each
run through the real command line. Whatever the input, tuner answers with its documented exit status (0 done, 1 the
target unreachable, 2 bad input), one ``tuner: error: …`` sentence and at most a ``hint: …`` line on stderr; never a
traceback or "unexpected error", never the password it was given, and nothing on disk changed. Every place tuner
writes by default is steered into the test's own directories (HOME, XDG_STATE_HOME, TUNER_TUNER__STATE_DIR); the
working directory and HOME are compared before and after. (The machine's /var/lib/tuner is not watched: other
test runs on this machine use it concurrently.)

Most cases run in-process through click's ``CliRunner`` (the same ``main`` the ``tuner`` script runs); a handful
run as real subprocesses (``python -m tuner``), so the entry point and the process's own stderr are covered too.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.unit.hostile import case_inputs
from tuner import log
from tuner.cli import main

REPO = Path(__file__).resolve().parents[2]  # subprocesses run this checkout's tuner
PASSWORD = "Hunter2-s3cr3t-x9"
NOWHERE = "/nonexistent-tuner-h37"  # a socket directory that does not exist: connecting fails at once
FileSpec = str | bytes | Callable[[Path], None]

POLICY = """[policy]
name = "t"
description = "t"
storage_class = "any"
[search.effective_io_concurrency]
min = {min}
max = {max}
{initial}
{extra}
"""


def policy(extra: str = "", *, min: str = "0", max: str = "100", initial: str = "") -> str:  # noqa: A002
    return POLICY.format(min=min, max=max, initial=initial, extra=extra)


def fifo(path: Path) -> None:
    os.mkfifo(path)


def directory(path: Path) -> None:
    path.mkdir()


def owned_by_nobody(content: str) -> Callable[[Path], None]:
    def make(path: Path) -> None:
        path.write_text(content)
        os.chown(path, 65534, 65534)

    return make


def with_mode(content: str, mode: int) -> Callable[[Path], None]:
    def make(path: Path) -> None:
        path.write_text(content)
        os.chmod(path, mode)

    return make


@dataclass
class Case:
    args: list[str]
    code: int = 2
    expect: str = ""  # a substring of stderr's sentence
    files: dict[str, FileSpec] = field(default_factory=dict)  # written into the working directory first
    env: dict[str, str | None] = field(default_factory=dict)  # None: unset
    subprocess: bool = False  # a real `python -m tuner` rather than click's CliRunner
    warning: bool = False  # a "tuner: warning: …" line comes first
    said_on: str = "stderr"  # where a success (exit 0) says its one sentence: "stdout" for reading commands
    warns: str = ""  # a "tuner: warning: …" line with this in it comes first (JSON on stdout, the sentence aside)
    input: str = ""  # the registered input it runs (tests/unit/hostile.py), when another case's: "" for its own


def validate(toml: str | bytes, expect: str, code: int = 2, **kw: object) -> Case:
    """``config validate --config tuner-in.toml`` with that file."""
    return Case(["config", "validate", "--config", "tuner-in.toml"], code, expect,
                files={"tuner-in.toml": toml, **kw.pop("files", {})}, **kw)  # type: ignore[arg-type]


def with_policy(text: str | bytes, expect: str, code: int = 2) -> Case:
    return Case(["config", "validate", "--config", "tuner-in.toml"], code, expect,
                files={"tuner-in.toml": "[tuner]\npolicy = 'p.toml'\n", "p.toml": text})


def dsn(value: str, expect: str, code: int = 2, **kw: object) -> Case:
    return Case(["recommend", "--dsn", value, "--family", "concurrency"], code, expect, **kw)  # type: ignore[arg-type]


def env(variables: dict[str, str], expect: str, code: int = 2) -> Case:
    return Case(["config", "validate"], code, expect, env=variables)


P = PASSWORD
CASES: dict[str, Case] = {
    # -- configuration files ----------------------------------------------------------------------------------
    "config-binary": validate(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4, "not UTF-8 text"),
    "config-half-written": validate(f'[target]\ndsn = "host=x password={P}', "invalid TOML"),
    "config-nul-byte": validate(b"[target]\x00\ndsn = 'x'\n", "invalid TOML"),
    "config-empty": validate("", "configuration OK", code=0),
    "config-comments-only": validate("# nothing\n\n# here\n", "configuration OK", code=0),
    "config-unknown-section": validate("[targte]\ndsn = 'x'\n", "unknown key"),
    "config-section-is-scalar": validate("target = 5\n", "target"),
    "config-section-is-array": validate("target = [1, 2]\n", "target"),
    "config-duplicate-key": validate("[sandbox]\nscale = 1\nscale = 2\n", "invalid TOML"),
    "config-nested-too-deep": validate("v = " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
    "config-number-too-long": validate("[sandbox]\nscale = 1" + "0" * 5000 + "\n", "number too long"),
    "config-too-large": validate("# " + "x" * (1 << 20) + "\n", "larger than"),
    "config-bad-unicode-escape": validate('[target]\ndsn = "\\uD800"\n', "invalid TOML"),
    "timeout-inf": validate("[target]\nconnect_timeout_s = inf\n", "finite number"),
    "timeout-minus-inf": validate("[target]\nconnect_timeout_s = -inf\n", "finite number"),
    "timeout-nan": validate("[target]\nconnect_timeout_s = nan\n", "finite number"),
    "timeout-1e308": validate("[target]\nconnect_timeout_s = 1e308\n", "less than or equal to 3600"),
    "timeout-negative": validate("[target]\nconnect_timeout_s = -1\n", "greater than 0"),
    "timeout-zero": validate("[target]\nconnect_timeout_s = 0\n", "greater than 0"),
    "timeout-text": validate("[target]\nconnect_timeout_s = 'ten'\n", "valid number"),
    "timeout-date": validate("[target]\nconnect_timeout_s = 1979-05-27\n", "connect_timeout_s"),
    "seed-negative": validate("[tuner]\nseed = -1\n", "greater than or equal to 0"),
    "seed-2**32": validate("[tuner]\nseed = 4294967296\n", "less than or equal to 4294967295"),
    "seed-int64-max": validate("[tuner]\nseed = 9223372036854775807\n", "less than or equal"),
    "seed-fraction": validate("[tuner]\nseed = 1.5\n", "fractional part"),
    "scale-zero": validate("[sandbox]\nscale = 0\n", "greater than or equal to 1"),
    "scale-huge": validate("[sandbox]\nscale = 10001\n", "less than or equal to 10000"),
    "relations-float": validate("[workload]\nrelations = 1e9\n", "[workload] relations"),
    "pages-fraction-nan": validate("[workload]\npages_fraction = nan\n", "finite number"),
    "families-string": validate("[tuner]\nfamilies = 'concurrency'\n", "[tuner] families"),
    "families-unknown": validate("[tuner]\nfamilies = ['nope']\n", "unknown family"),
    "log-level-unknown": validate("[tuner]\nlog_level = 'trace'\n", "[tuner] log_level"),
    "format-unknown": validate("[output]\nformat = 'xml'\n", "unknown format"),
    "state-dir-under-a-file": validate("[tuner]\nstate_dir = '/etc/passwd/x'\n", "is a file, not a directory",
                                       env={"TUNER_TUNER__STATE_DIR": None}),
    "state-dir-nul": validate('[tuner]\nstate_dir = "/tmp/a\\u0000b"\n', "NUL character",
                              env={"TUNER_TUNER__STATE_DIR": None}),
    "base-dir-is-a-file": validate("[sandbox]\nbase_dir = '/etc/passwd'\n", "is a file, not a directory"),
    "output-dir-under-a-file": validate("[output]\ndirectory = '/etc/passwd/out'\n", "is a file, not a directory"),
    "helper-command-nul": validate('[readahead]\nhelper_command = "a\\u0000b"\n', "NUL character"),
    "source-key": validate("source = '/etc'\n", "unknown key"),
    "dsn-unterminated-quote": validate(f"[target]\ndsn = \"host=x password='{P}\"\n", "unterminated quoted string"),
    "dsn-keepalives": validate(f"[target]\ndsn = 'host=x keepalives=1 password={P}'\n", "'keepalives'"),
    "dsn-options-supported": validate(f"[target]\ndsn = \"host=x options='-c work_mem=4MB' password={P}\"\n",
                                      "configuration OK", code=0),
    "dsn-uri-bad-port": validate(f"[target]\ndsn = 'postgresql://u:{P}@h:99999/db'\n", "port"),
    # Connection strings are read by libpq itself (tuner.target.conninfo): its messages, quoted text hidden.
    "dsn-uri-bad-query": validate(f"[target]\ndsn = 'postgresql://u:{P}@h/db?{P}'\n", "missing key/value separator"),
    "dsn-garbage": validate(f"[target]\ndsn = '=== password={P}'\n", 'invalid connection option "…"'),
    "dsn-nul": validate('[target]\ndsn = "host=x\\u0000"\n', "NUL character"),
    "dsn-unknown-keyword": validate(f"[target]\ndsn = 'host=x password={P} xyzzy=1'\n", 'invalid connection option "…"'),
    # -- --config paths -----------------------------------------------------------------------------------------
    "config-path-under-a-file": Case(["config", "validate", "--config", "/etc/passwd/x"], 2, "is a file"),
    "config-path-dev-zero": Case(["config", "validate", "--config", "/dev/zero"], 2, "not a regular file"),
    "config-path-directory": Case(["config", "validate", "--config", "d"], 2, "is a directory",
                                  files={"d": directory}),
    "config-path-fifo": Case(["config", "validate", "--config", "f.toml"], 2, "not a regular file",
                             files={"f.toml": fifo}),
    "config-path-missing": Case(["config", "validate", "--config", "absent.toml"], 2, "no such file"),
    "config-path-empty": Case(["config", "validate", "--config", ""], 2, "is a directory"),
    # -- policies -----------------------------------------------------------------------------------------------
    "policy-probes-huge": with_policy(policy("[budget]\nprobes = 1e9\n"), "[budget] probes"),
    "policy-statement-timeout-inf": with_policy(policy("[guardrails]\nstatement_timeout_s = inf\n"), "finite"),
    "policy-statement-timeout-huge": with_policy(policy("[guardrails]\nstatement_timeout_s = 1e12\n"), "86400"),
    "policy-min-effect-nan": with_policy(policy("[decision]\nmin_effect = nan\n"), "finite number"),
    "policy-alpha-half": with_policy(policy("[decision]\nalpha = 0.5\n"), "less than 0.5"),
    "policy-min-huge-negative": with_policy(policy(min="-100000000000000000000"), "search"),
    "policy-max-beyond-int32": with_policy(policy(max="4294967296"), "less than or equal to 2147483647"),
    "policy-initial-too-many": with_policy(policy(initial=f"initial = {list(range(100))}"), "at most 64"),
    "policy-unknown-knob": with_policy(policy("[search.bogus]\nmin = 0\nmax = 1\n"), "bogus"),
    "policy-binary": with_policy(b"\xff\xfe\x00garbage", "not UTF-8 text"),
    "policy-empty": with_policy("", "policy"),
    "policy-wal-clients-zero": with_policy(policy("[wal]\nclients = 0\n"), "[wal] clients"),
    "policy-wal-scaling-huge": with_policy(policy("[wal]\nscaling_clients = [100000]\n"), "1 to 256"),
    "policy-wal-buffers-huge": with_policy(policy("[wal]\nwal_buffers = [1000000000]\n"), "262143"),
    "policy-weights-zero": with_policy(policy("[readahead]\nseq_scan_weight = 0\nbitmap_scan_weight = 0\n"),
                                       "cannot both be 0"),
    "policy-weight-inf": with_policy(policy("[readahead]\nseq_scan_weight = inf\n"), "finite number"),
    "policy-path-dev-zero": validate("[tuner]\npolicy = '/dev/zero'\n", "not a regular file"),
    "policy-path-passwd": validate("[tuner]\npolicy = '../../../../../../etc/passwd'\n", "invalid TOML"),
    # -- environment variables ----------------------------------------------------------------------------------
    "env-too-deep": env({"TUNER_TARGET__DSN__X": "1"}, "TUNER_TARGET__DSN__X does not name a setting"),
    "env-empty-parts": env({"TUNER___": "1"}, "TUNER___ does not name a setting"),
    "env-timeout-inf": env({"TUNER_TARGET__CONNECT_TIMEOUT_S": "inf"}, "TUNER_TARGET__CONNECT_TIMEOUT_S:"),
    "env-scale-array": env({"TUNER_SANDBOX__SCALE": "[1, 2]"}, "TUNER_SANDBOX__SCALE: [sandbox] scale"),
    "env-seed-negative": env({"TUNER_TUNER__SEED": "-5"}, "TUNER_TUNER__SEED: [tuner] seed"),
    "env-dsn-keepalives": env({"TUNER_TARGET__DSN": f"host=x password={P} keepalives=1"}, "TUNER_TARGET__DSN:"),
    "env-dsn-table": env({"TUNER_TARGET__DSN": "{a = 1}"}, "valid string"),
    "env-dsn-deep-nesting": env({"TUNER_TARGET__DSN": "[" * 5000}, "cannot be parsed"),
    "env-unknown-section": env({"TUNER_NOPE__X": "1"}, "TUNER_NOPE__X: nope: unknown key"),
    # -- DSNs on the command line ---------------------------------------------------------------------------------
    "dsn-unreachable": dsn(f"host={NOWHERE} port=5432 password={P}", "could not connect", code=1),
    "dsn-unreachable-uri": dsn(f"postgresql://u:{P}@/db?host={NOWHERE}", "could not connect", code=1),
    "dsn-unreachable-multi-host": dsn(f"host={NOWHERE},{NOWHERE}2 port=1,2 password={P}", "could not connect",
                                      code=1),
    "dsn-unreachable-newlines": dsn(f"host={NOWHERE}\npassword={P}\n", "could not connect", code=1),
    "dsn-options-unreachable": dsn(f"host={NOWHERE} options='-c x=y' password={P}", "could not connect", code=1),
    "dsn-keepalives-cli": dsn(f"host={NOWHERE} keepalives=1 password={P}", "'keepalives'"),
    # hostaddr alone is the host asyncpg connects to (libpq's meaning); beside a host name asyncpg cannot do it.
    "dsn-hostaddr": dsn(f"hostaddr=127.0.0.1 port=1 password={P}", "could not connect to", code=1),
    "dsn-hostaddr-beside-host": dsn(f"host={NOWHERE} hostaddr=127.0.0.1 password={P}", "'hostaddr' beside 'host'"),
    "dsn-keepalives-off": dsn(f"host={NOWHERE} keepalives=0 keepalives_idle=5 password={P}", "could not connect",
                              code=1),
    "dsn-client-encoding-utf8": dsn(f"host={NOWHERE} client_encoding=UTF8 password={P}", "could not connect", code=1),
    "dsn-client-encoding-latin1": dsn(f"host={NOWHERE} client_encoding=LATIN1 password={P}", "'client_encoding'"),
    "dsn-channel-binding-require": dsn(f"host={NOWHERE} channel_binding=require password={P}", "'channel_binding'"),
    "dsn-service-undefined": dsn(f"service=nowhere-h47 password={P}", "service 'nowhere-h47'",
                                 env={"PGSERVICEFILE": "/nonexistent-h47/pg_service.conf",
                                      "PGSYSCONFDIR": "/nonexistent-h47"}),
    "dsn-env-require-auth": dsn(f"host={NOWHERE} password={P}", "'require_auth'",
                                env={"PGREQUIREAUTH": "scram-sha-256"}),
    "dsn-require-auth": dsn(f"host={NOWHERE} require_auth=scram-sha-256 password={P}", "'require_auth'"),
    "dsn-empty-host-in-list": dsn(f"host=a,,b password={P}", "empty entry in its host list"),
    "dsn-uri-empty-host-in-list": dsn(f"postgresql://u:{P}@a,,b/db", "empty entry in its host list"),
    "dsn-bad-session-attrs": dsn(f"host={NOWHERE} target_session_attrs=bogus password={P}", "target_session_attrs"),
    "dsn-bad-sslmode": dsn(f"host={NOWHERE} sslmode=maybe password={P}", "sslmode"),
    "dsn-port-text": dsn(f"host={NOWHERE} port=abc password={P}", "port"),
    "dsn-password-two-words": dsn(f"host={NOWHERE} password={P} {P}", 'missing "=" after "…"'),
    "dsn-uri-ipv6-broken": dsn(f"postgresql://u:{P}@[::1/db", 'IPv6 host address in URI: "…"'),
    "dsn-empty": dsn("", "no target"),
    "pgport-text": dsn(f"host={NOWHERE} password={P}", "invalid connection settings", env={"PGPORT": "abc"}),
    "pgtargetsessionattrs-bogus": dsn(f"host={NOWHERE}", "target_session_attrs",
                                      env={"PGTARGETSESSIONATTRS": "bogus"}),
    # -- other command-line values --------------------------------------------------------------------------------
    "seed-minus-one": Case(["recommend", "--dsn", f"host={NOWHERE}", "--seed", "-1"], 2, "0<=x<=4294967295"),
    "seed-2**32-cli": Case(["recommend", "--dsn", f"host={NOWHERE}", "--seed", "4294967296"], 2, "--seed"),
    "seed-text": Case(["recommend", "--dsn", f"host={NOWHERE}", "--seed", "abc"], 2, "--seed"),
    "budget-zero": Case(["recommend", "--dsn", f"host={NOWHERE}", "--budget", "0"], 2, "--budget"),
    "scale-negative-cli": Case(["recommend", "--dsn", f"host={NOWHERE}", "--scale", "-5"], 2, "--scale"),
    "family-unknown-cli": Case(["recommend", "--family", "bogus"], 2, "--family"),
    "format-unknown-cli": Case(["recommend", "--format", "xml"], 2, "--format"),
    "output-under-a-file": Case(["recommend", "--dsn", f"host={NOWHERE}", "--output", "/etc/passwd/out"], 2,
                                "is a file"),
    "policy-dev-null-cli": Case(["recommend", "--dsn", f"host={NOWHERE}", "--policy", "/dev/null"], 2,
                                "not a regular file"),
    "policy-unknown-cli": Case(["recommend", "--dsn", f"host={NOWHERE}", "--policy", "nope"], 2, "no policy"),
    "unknown-option": Case(["recommend", "--bogus"], 2, "No such option"),
    # sandbox-only options against a target: refused, not silently ignored
    "pg-version-without-sandbox": Case(["recommend", "--dsn", f"host={NOWHERE}", "--pg-version", "17"], 2,
                                       "--pg-version picks the PostgreSQL of tuner's own sandbox"),
    "scale-without-sandbox": Case(["recommend", "--dsn", f"host={NOWHERE}", "--scale", "5"], 2,
                                  "--scale sizes the dataset of tuner's own sandbox"),
    "device-without-sandbox": Case(["recommend", "--dsn", f"host={NOWHERE}", "--device", "hdd"], 2,
                                   "--device emulates a disk under tuner's own sandbox"),
    "daemon-scale-without-sandbox": Case(["daemon", "--check-config", "--scale", "5"], 2,
                                         "--scale sizes the dataset of the daemon's own sandbox"),
    "subprocess-pg-version-without-sandbox": Case(["recommend", "--pg-version", "16"], 2, "--pg-version",
                                                  subprocess=True),
    "unknown-command": Case(["bogus"], 2, "No such command"),
    "restore-state-dir-under-a-file": Case(["restore", "--state-dir", "/etc/passwd/x"], 2, "is a file"),
    "restore-state-dir-is-a-file": Case(["restore", "--state-dir", "f"], 2, "is a file",
                                        files={"f": "not a directory\n"}),
    "restore-state-dir-absent": Case(["restore", "--state-dir", "absent"], 0, "nothing to restore"),
    # -- ./tuner.toml read implicitly as root -------------------------------------------------------------------
    "implicit-config-of-another-user": Case(
        ["restore", "--state-dir", "absent"], 0, "nothing to restore", warning=True,
        files={"tuner.toml": owned_by_nobody("[readahead]\nhelper_command = 'touch PWNED'\n[tuner]\nseed = -1\n")}),
    "implicit-config-world-writable": Case(
        ["config", "validate"], 0, "no tuner.toml read", warning=True,
        files={"tuner.toml": with_mode("[tuner]\nseed = -1\n", 0o666)}),
    # -- real subprocesses ----------------------------------------------------------------------------------------
    "subprocess-binary-config": validate(b"\x00\xff" * 64, "not UTF-8 text", subprocess=True),
    "subprocess-unreachable": dsn(f"host={NOWHERE} password={P}", "could not connect", code=1, subprocess=True),
    "subprocess-dsn-garbage": dsn(f"=== password={P}", "invalid connection option", subprocess=True),
    "subprocess-env-too-deep": Case(["config", "validate"], 2, "TUNER_TARGET__DSN__X",
                                    env={"TUNER_TARGET__DSN__X": "1"}, subprocess=True, input="env-too-deep"),
    "subprocess-seed-minus-one": Case(["recommend", "--dsn", f"host={NOWHERE}", "--seed", "-1"], 2, "--seed",
                                      subprocess=True, input="seed-minus-one"),
    "subprocess-restore-hostile-dir": Case(
        ["restore", "--state-dir", "absent"], 0, "nothing to restore", warning=True, subprocess=True,
        files={"tuner.toml": owned_by_nobody("[readahead]\nhelper_command = 'touch PWNED'\n")}),
}


INPUTS = case_inputs(CASES.items(), "command line: config, policy, environment, DSN, options")


def _tree(root: Path) -> dict[str, tuple[int, str]]:
    out = {}
    for p in sorted(root.rglob("*")):
        st = p.lstat()
        digest = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() and not p.is_fifo() else ""
        out[str(p.relative_to(root))] = (st.st_mode, digest)
    return out


def _run(case: Case, cwd: Path, env: dict[str, str]) -> tuple[int, str, str]:
    if case.subprocess:
        proc = subprocess.run([sys.executable, "-m", "tuner", *case.args], capture_output=True, text=True, cwd=cwd,
                              timeout=120, env={k: v for k, v in env.items() if v is not None})
        return proc.returncode, proc.stdout, proc.stderr
    runner = CliRunner()
    try:
        with contextlib.chdir(cwd):
            result = runner.invoke(main, case.args, env=env, catch_exceptions=True)
    finally:
        log.configure("warning", json=True)  # `recommend` configures logging for its (captured) stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"uncaught {type(result.exception).__name__}: {result.exception}")
    return result.exit_code, result.stdout, result.stderr


def prepare(case: Case, tmp_path: Path) -> tuple[Path, Path, Path, dict[str, str | None]]:
    """The case's working directory (with its files), HOME and state directory under ``tmp_path``, and the
    environment that steers every place tuner writes by default into them."""
    cwd, home, state = tmp_path / "cwd", tmp_path / "home", tmp_path / "state"
    for d in (cwd, home):
        d.mkdir()
    for fname, spec in case.files.items():
        if callable(spec):
            spec(cwd / fname)
        elif isinstance(spec, bytes):
            (cwd / fname).write_bytes(spec)
        else:
            (cwd / fname).write_text(spec)
    environ: dict[str, str | None] = {k: None for k in os.environ if k.startswith(("PG", "TUNER_"))}
    environ.update({"HOME": str(home), "XDG_STATE_HOME": str(home / "state"), "TUNER_TUNER__STATE_DIR": str(state),
                    "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(REPO),
                    **case.env})
    return cwd, home, state, environ


@pytest.mark.parametrize("name", list(CASES))
def test_hostile_input(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    check_case(case, tmp_path)


def check_case(case: Case, tmp_path: Path) -> None:
    """Run ``case`` in ``tmp_path`` and assert what every hostile input must get: its exit status, one sentence
    (and at most a hint), no traceback or password, nothing changed in the working directory, HOME or state.
    Shared with the other hostile-input modules (test_hostile_service.py)."""
    cwd, home, state, environ = prepare(case, tmp_path)
    before = _tree(cwd)

    code, stdout, stderr = _run(case, cwd, environ)  # type: ignore[arg-type]

    lines = stderr.strip().splitlines()
    assert code == case.code, stderr
    assert "Traceback" not in stderr and "unexpected error" not in stderr, stderr
    assert PASSWORD not in stdout + stderr and "s3cr3t" not in stdout + stderr, stderr
    if case.warning:
        assert lines and lines[0].startswith("tuner: warning: ignored ./tuner.toml: "), stderr
        assert "--config ./tuner.toml" in lines[0]
        lines = lines[1:]
    if case.warns:  # one line per thing left out
        assert lines and lines[0].startswith("tuner: warning: ") and case.warns in lines[0], stderr
        while lines and lines[0].startswith("tuner: warning: ") and case.warns in lines[0]:
            lines = lines[1:]
    if code == 0 and case.said_on == "stdout":
        assert not lines and stdout.strip() and case.expect in stdout, (stdout, stderr)
    elif code == 0:
        assert len(lines) == 1 and lines[0].startswith("tuner: ") and case.expect in lines[0], stderr
    else:
        assert 1 <= len(lines) <= 2, stderr
        assert lines[0].startswith("tuner: error: ") and case.expect in lines[0], stderr
        assert len(lines) == 1 or lines[1].startswith("hint: "), stderr
        assert stdout == ""
    after = _tree(cwd)
    for lock in [p for p in after if p.rsplit("/", 1)[-1] == "journal.lock" and p not in before]:
        after.pop(lock)  # the lock file stays in the state directory, by design (see below)
    assert after == before, "the working directory changed"
    assert not (cwd / "PWNED").exists() and not list(home.iterdir())
    # The lock file stays (an empty file, flock'd while a session runs; removing it would race): no journal.
    left = [p for p in state.iterdir() if p.name != "journal.lock"] if state.exists() else []
    assert not left, f"a journal was left behind: {left}"


def test_the_corpus_is_large_enough() -> None:
    assert len(CASES) >= 60
    assert sum(c.subprocess for c in CASES.values()) >= 5
    assert {c.code for c in CASES.values()} == {0, 1, 2}
