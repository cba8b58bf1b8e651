"""Issue #58 item 6: one answer to "what is my restart_command" — through the server's own systemd unit, never
pg_ctl (under the daemon's unit the server pg_ctl starts would live in tuner's control group). Every example in the
README, the docs, the examples and the sample tuner.toml gives it, and `tuner check` warns on pg_ctl."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tuner.settings.config import Config
from tuner.settings.policy import load_policy
from tuner.session.check import RESTART_EXAMPLE, _restart

ROOT = Path(__file__).resolve().parent.parent.parent
DOCS = [ROOT / "README.md", ROOT / "tuner.toml", *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "examples").glob("*.toml")), ROOT / "examples" / "systemd" / "tuner.service"]
# `restart_command = "…"` in TOML, and "restart_command` (e.g. `…`)" in prose.
EXAMPLE = re.compile(r'restart_command\s*=\s*"([^"]+)"|restart_command` \(e\.g\. `([^`]+)`')


def test_every_restart_command_example_restarts_through_the_servers_own_unit() -> None:
    found = [(p.name, a or b) for p in DOCS for a, b in EXAMPLE.findall(p.read_text())]
    assert len(found) >= 4
    for where, command in found:
        if command.startswith("pg_ctl …"):
            continue  # the unit's own "not a place for" sentence
        assert "systemctl restart postgresql@" in command, (where, command)
    assert RESTART_EXAMPLE.startswith("systemctl restart postgresql@")


@pytest.mark.parametrize("command", ["pg_ctl -D /srv/pg -w restart", "/usr/lib/postgresql/15/bin/pg_ctl restart"])
def test_check_warns_that_pg_ctl_puts_the_server_in_tuners_unit(command: str) -> None:
    cfg = Config.model_validate({"target": {"restart_command": command}})
    got = _restart(cfg, load_policy("default"), sandbox=False)
    assert got.status == "warn" and "pg_ctl" in got.detail and RESTART_EXAMPLE in (got.fix or "")
