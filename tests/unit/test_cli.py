"""The command line's handling of bad input: one sentence, a hint, exit 2, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tuner", *args], capture_output=True, text=True, cwd=cwd, timeout=120,
        env={"PATH": "/usr/bin:/bin", **(env or {})},
    )


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("[target\ndsn = 'x'\n", "invalid TOML"),
        ("[target]\ndns = 'x'\n", "[target] dns: unknown key"),
        ("[sandbox]\nscale = 'big'\n", "[sandbox] scale"),
        ("[tuner]\npolicy = 'nope'\n", "no policy named 'nope'"),
    ],
)
def test_malformed_config_exits_2_with_one_line(tmp_path: Path, content: str, expected: str) -> None:
    (tmp_path / "tuner.toml").write_text(content)
    for args in (["config", "validate"], ["recommend", "--dsn", "host=/nonexistent"]):
        proc = run(*args, cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert lines[0].startswith("tuner: error: ") and expected in lines[0]
        assert "Traceback" not in proc.stderr
        assert proc.stdout == ""


def test_config_file_is_not_changed_by_validation(tmp_path: Path) -> None:
    content = "[target]\ndns = 'x'\n"
    (tmp_path / "tuner.toml").write_text(content)
    run("config", "validate", cwd=tmp_path)
    assert (tmp_path / "tuner.toml").read_text() == content


def test_validate_print_shows_the_effective_config(tmp_path: Path) -> None:
    (tmp_path / "tuner.toml").write_text("[sandbox]\nscale = 5\n")
    proc = run("config", "validate", "--print", cwd=tmp_path, env={"TUNER_SANDBOX__KEEP": "true"})
    assert proc.returncode == 0, proc.stderr
    assert "scale = 5" in proc.stdout and "keep = true" in proc.stdout
    assert "# dsn is unset" in proc.stdout


def test_no_target_is_a_clear_error(tmp_path: Path) -> None:
    proc = run("recommend", cwd=tmp_path)
    assert proc.returncode == 2
    assert "no target" in proc.stderr and "--sandbox" in proc.stderr


def test_unreachable_target_is_one_sentence_exit_1(tmp_path: Path) -> None:
    proc = run("recommend", "--dsn", "host=/nonexistent-socket-dir port=1", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip().splitlines()[-2].startswith("tuner: error: could not connect")
    assert "Traceback" not in proc.stderr


def test_bad_option_value_exits_2(tmp_path: Path) -> None:
    proc = run("recommend", "--format", "yaml", cwd=tmp_path)
    assert proc.returncode == 2
    assert "yaml" in proc.stderr


def test_help_documents_exit_codes_and_examples(tmp_path: Path) -> None:
    proc = run("recommend", "--help", cwd=tmp_path)
    assert proc.returncode == 0
    for text in ("Exit status:", "refused by the safety interlock", "tuner recommend --sandbox", "--output"):
        assert text in proc.stdout


def test_a_policy_path_that_is_a_directory_is_bad_input(tmp_path: Path) -> None:
    (tmp_path / "tuner.toml").write_text("[tuner]\npolicy = 'dir.toml'\n")
    (tmp_path / "dir.toml").mkdir()
    proc = run("config", "validate", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "is a directory" in proc.stderr
