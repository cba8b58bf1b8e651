"""Every ``--help`` fits an 80-column terminal at any terminal width, says its exit statuses, and carries the
configuration block only where the command reads the whole configuration; shell completion is documented and
works."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from tuner.cli import main

REPO = Path(__file__).resolve().parents[2]
CONFIG_BLOCK = "Connection: read by libpq itself"


def commands(group: click.Group = main, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command path under ``group``, the group itself first: (), ("recommend",), ("config", "validate") …"""
    out = [path]
    for name, cmd in sorted(group.commands.items()):
        if isinstance(cmd, click.Group):
            out += commands(cmd, (*path, name))
        else:
            out.append((*path, name))
    return out


def helptext(path: tuple[str, ...], columns: int = 200) -> str:
    result = CliRunner().invoke(main, [*path, "--help"], env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("columns", [40, 80, 200])
@pytest.mark.parametrize("path", commands(), ids=lambda p: " ".join(p) or "tuner")
def test_no_help_line_is_wider_than_80_columns(path: tuple[str, ...], columns: int) -> None:
    wide = [line for line in helptext(path, columns).splitlines() if len(line) > 80]
    assert not wide, wide


@pytest.mark.parametrize("path", commands(), ids=lambda p: " ".join(p) or "tuner")
def test_every_command_says_its_exit_status(path: tuple[str, ...]) -> None:
    assert "Exit status" in helptext(path)


@pytest.mark.parametrize("path", [("history",), ("show",), ("diff",), ("export",), ("prune",)])
def test_the_store_readers_do_not_carry_the_connection_block(path: tuple[str, ...]) -> None:
    text = helptext(path)
    assert CONFIG_BLOCK not in text and "TUNER_SANDBOX__SCALE" not in text
    assert "only [store] and [tuner] state_dir are read" in text


@pytest.mark.parametrize("path", [(), ("recommend",), ("check",), ("restore",), ("daemon",), ("config", "validate")])
def test_the_commands_that_read_the_whole_configuration_carry_its_block(path: tuple[str, ...]) -> None:
    assert CONFIG_BLOCK in helptext(path)


def test_recommend_help_groups_its_options_and_is_short() -> None:
    text = helptext(("recommend",))
    assert len(text.splitlines()) <= 90
    headings = ["Target:", "Sandbox (", "Search:", "Output:", "Other options:"]
    at = [text.index(h) for h in headings]
    assert at == sorted(at)
    for param in main.commands["recommend"].params:
        for opt in param.opts:
            # listed once, under one heading (an option's row starts at column 2, its name alone or before its
            # metavar; examples are indented further)
            rows = [ln for ln in text.splitlines() if ln.startswith(f"  {opt}") and ln[2:].split()[0] == opt]
            assert len(rows) == 1, opt
    assert "docs/guide.md" in text


def test_shell_completion_is_documented_and_works(tmp_path: Path) -> None:
    assert '_TUNER_COMPLETE=bash_source tuner' in helptext(())
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(REPO), "HOME": str(tmp_path),
           "_TUNER_COMPLETE": "bash_complete", "COMP_WORDS": "tuner recommend --fam", "COMP_CWORD": "2"}
    proc = subprocess.run([sys.executable, "-c", "from tuner.cli import main; main(prog_name='tuner')"],
                          capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert proc.stdout.split() == ["plain,--family"], proc.stderr
    env["COMP_WORDS"], env["COMP_CWORD"] = "tuner rec", "1"
    proc = subprocess.run([sys.executable, "-c", "from tuner.cli import main; main(prog_name='tuner')"],
                          capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert proc.stdout.split() == ["plain,recommend"], proc.stderr


def test_the_real_command_fits_at_a_narrow_terminal(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "tuner", "recommend", "--help"], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "COLUMNS": "40"})
    assert proc.returncode == 0 and max(len(line) for line in proc.stdout.splitlines()) <= 80
