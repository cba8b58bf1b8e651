"""The command line's handling of bad input: one sentence, a hint, exit 2, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


REPO = Path(__file__).resolve().parents[2]


def run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # PYTHONPATH: this checkout's tuner, whichever one the interpreter has installed. The state directory: the
    # test's own (tests/conftest.py), not the machine's /var/lib/tuner, which other test runs use meanwhile.
    own = {"TUNER_TUNER__STATE_DIR": os.environ["TUNER_TUNER__STATE_DIR"]} if "TUNER_TUNER__STATE_DIR" in os.environ else {}
    return subprocess.run(
        [sys.executable, "-m", "tuner", *args], capture_output=True, text=True, cwd=cwd, timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), **own, **(env or {})},
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


def test_validate_print_never_shows_the_password(tmp_path: Path) -> None:
    (tmp_path / "tuner.toml").write_text("[target]\ndsn = 'host=db1 user=u password=Hunter2-pw'\n")
    uri = {"TUNER_TARGET__DSN": "postgresql://u:Hunter2-pw@db1/app"}
    for env in (None, uri):
        proc = run("config", "validate", "--print", cwd=tmp_path, env=env)
        assert proc.returncode == 0, proc.stderr
        assert "Hunter2" not in proc.stdout + proc.stderr
        assert 'dsn = "host=db1 user=u password=***"' in proc.stdout or "postgresql://u:***@db1/app" in proc.stdout


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["recommend", "--dsn", "host=/nonexistent", "--seed", "-1"], "'--seed': -1 is not in the range 0<=x<=4294967295"),
        (["recommend", "--dsn", "host=/nonexistent", "--seed", "4294967296"], "'--seed'"),
        (["recommend", "--no-such-option"], "No such option"),
    ],
)
def test_a_bad_option_is_one_sentence_with_a_hint(tmp_path: Path, args: list[str], expected: str) -> None:
    proc = run(*args, cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("tuner: error: ") and expected in lines[0], proc.stderr
    assert lines[1].startswith("hint: see '") and "--help'" in lines[1]


def test_a_seed_out_of_range_in_the_environment_is_bad_input(tmp_path: Path) -> None:
    proc = run("config", "validate", cwd=tmp_path, env={"TUNER_TUNER__SEED": "-1"})
    assert proc.returncode == 2
    assert proc.stderr.startswith("tuner: error: TUNER_TUNER__SEED: [tuner] seed: Input should be greater than")


def test_help_documents_the_root_rule_and_the_bounds(tmp_path: Path) -> None:
    for args in (["--help"], ["config", "validate", "--help"], ["restore", "--help"], ["recommend", "--help"]):
        out = run(*args, cwd=tmp_path).stdout
        assert "As root, ./tuner.toml is read only when root owns it" in out
        assert "--seed 0..4294967295" in out and "inf and nan are refused" in out


def test_validate_print_is_toml_that_no_value_can_break_out_of_and_shows_no_password(tmp_path: Path) -> None:
    import tomllib

    cfg = tmp_path / "t.toml"
    cfg.write_text('[target]\nrestart_command = "PGPASSWORD=s3cret pg_ctl restart\\n[tuner]\\npolicy = \\"evil\\""\n'
                   '[readahead]\nhelper_command = "sudo env password=\'s3cret\' ra {path} {value}"\n')
    proc = run("config", "validate", "--config", str(cfg), "--print", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "s3cret" not in proc.stdout
    doc = tomllib.loads(proc.stdout)
    assert doc["tuner"]["policy"] == "default"  # the injected section stayed inside the string
    assert doc["target"]["restart_command"] == 'PGPASSWORD=*** pg_ctl restart\n[tuner]\npolicy = "evil"'
