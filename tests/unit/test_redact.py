"""Issue 44, item 3: one redaction wherever tuner prints configuration, logs or errors — DSN and URI passwords
(a raw ``@``, quotes, spaces, ``%40``) and, inside commands, ``password=…``, ``PGPASSWORD=…`` and URI passwords."""

from __future__ import annotations

import io
import json
import tomllib
from pathlib import Path

import pytest

from tuner import log as tlog
from tuner import redact
from tuner.redact import dsn as redact_dsn

from .test_cli import run

NASTY = ["p@ss", "p@ss@word", "a b c", "it's", 'qu"ote', "p%40ss", "x:y:z", "#hash", "back\\slash", "é ü"]


def _uri(password: str) -> str:
    return f"postgresql://tuner:{password}@db.example.com:5432/app?sslmode=require"


@pytest.mark.parametrize("password", NASTY)
def test_a_uri_password_is_hidden_whole_up_to_the_last_at_before_the_host(password: str) -> None:
    shown = redact.text(_uri(password))
    assert shown == "postgresql://tuner:***@db.example.com:5432/app?sslmode=require"
    assert redact_dsn(_uri(password)) == shown


@pytest.mark.parametrize("password", NASTY)
def test_a_keyword_dsn_password_is_hidden_quoted_the_libpq_way(password: str) -> None:
    quoted = "'" + password.replace("\\", "\\\\").replace("'", "\\'") + "'"
    shown = redact.text(f"host=db password={quoted} dbname=app")
    assert shown == "host=db password=*** dbname=app"


@pytest.mark.parametrize("command, secret", [
    ("PGPASSWORD=s3cr3t pg_ctl -D /d restart", "s3cr3t"),
    ("PGPASSWORD='a b@c' pg_ctl restart", "a b@c"),
    ("PGPASSWORD=\"q\\\"x y\" pg_ctl restart", "x y"),
    ("env PGPASSWORD=it\\'s pg_ctl restart", "it"),
    ("psql 'host=db password=s3cr3t' -c 'select 1'", "s3cr3t"),
    ("psql \"host=db password='sp ace'\" -c 1", "sp ace"),
    ("psql postgresql://u:p@ss@db/app -c 'select pg_reload_conf()'", "p@ss"),
    ("psql 'postgresql://u:sp ace@db/app' -c 1", "sp ace"),
    ("psql postgresql://u:p%40ss@db/app; psql \"postgresql://v:two@db\"", "p%40ss"),
    ("ssh staging 'PGPASSWORD=s3cr3t psql -c 1'", "s3cr3t"),
])
def test_passwords_inside_commands_are_hidden(command: str, secret: str) -> None:
    shown = redact.text(command)
    assert secret not in shown and "***" in shown
    assert "two" not in shown


def test_text_without_secrets_is_unchanged() -> None:
    for s in ("pg_ctl -D /srv/pg restart", "host=db dbname=app", "postgresql://db/app", "postgresql://u@db/app"):
        assert redact.text(s) == s


def _config_with_secrets(tmp_path: Path) -> Path:
    cfg = tmp_path / "t.toml"
    cfg.write_text(
        "[target]\n"
        'dsn = "postgresql://tuner:p@ss@word@db1/app"\n'
        'restart_command = "PGPASSWORD=\'s3 cr3t\' pg_ctl restart; psql postgresql://a:u%40ri@db1/x -c 1"\n'
        "[[daemon.targets]]\n"
        'name = "two"\n'
        "dsn = \"host=db2 password='kv secret' dbname=app\"\n"
        'restart_command = "ssh db2 \'psql \\"host=db2 password=cmdpw\\" -c 1\'"\n'
        "[[daemon.targets]]\n"
        'name = "three"\n'
        'dsn = "postgresql://x:%40enc@db3/app"\n')
    return cfg


SECRETS = ("p@ss", "ss@word", "s3 cr3t", "u%40ri", "kv secret", "cmdpw", "%40enc")


def test_validate_print_hides_every_secret_and_prints_toml_that_round_trips(tmp_path: Path) -> None:
    proc = run("config", "validate", "--config", str(_config_with_secrets(tmp_path)), "--print", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    for s in SECRETS:
        assert s not in proc.stdout, s
    doc = tomllib.loads(proc.stdout)
    targets = doc["daemon"]["targets"]
    assert [t["name"] for t in targets] == ["two", "three"]  # an array of tables, not a Python repr
    assert targets[0]["dsn"] == "host=db2 password=*** dbname=app"
    assert targets[1]["dsn"] == "postgresql://x:***@db3/app"
    assert doc["target"]["dsn"] == "postgresql://tuner:***@db1/app"
    assert "{'name'" not in proc.stdout


def test_daemon_check_config_shows_no_secret(tmp_path: Path) -> None:
    proc = run("daemon", "--check-config", "--config", str(_config_with_secrets(tmp_path)), cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out
    for s in SECRETS:
        assert s not in out, s


def test_a_log_line_never_carries_a_password_its_caller_left_in() -> None:
    buf = io.StringIO()
    tlog.configure("info", stream=buf, json=True)
    try:
        tlog.get_logger("t").info("connect", dsn="postgresql://u:p@ss@h/db", cmd="PGPASSWORD=zz9 pg_ctl restart")
    finally:
        tlog.configure("info")
    line = json.loads(buf.getvalue())
    assert line["dsn"] == "postgresql://u:***@h/db" and line["cmd"] == "PGPASSWORD=*** pg_ctl restart"
