"""Issue #58 item 1: `tuner init DIR` writes the samples a pip user starts from — tuner.toml, the systemd unit, the
alert rules and the dashboard — from the package, the unit's ExecStart this installation's tuner. The built wheel
does the same from outside the repository in tests/integration/test_wheel.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.unit.test_cli import run
from tests.unit.test_systemd_unit import needs_verify, verify
from tuner.cli.samples import SAMPLES, SAMPLES_DIR

NAMES = ["grafana-dashboard.json", "prometheus-rules.yml", "tuner.service", "tuner.toml"]


def test_init_writes_the_four_samples_and_the_unit_runs_this_tuner(tmp_path: Path) -> None:
    out = tmp_path / "samples"
    proc = run("init", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == NAMES
    assert (out / "tuner.toml").read_text() == (SAMPLES_DIR / "tuner.toml").read_text()
    assert (out / "prometheus-rules.yml").read_text() == (SAMPLES_DIR / "prometheus-rules.yml").read_text()
    unit = (out / "tuner.service").read_text()
    assert "/opt/tuner/bin/tuner" not in unit and "ExecStart=" in unit
    assert all(s.what in proc.stdout for s in SAMPLES)
    valid = run("config", "validate", "--config", str(out / "tuner.toml"), cwd=tmp_path)
    assert valid.returncode == 0, valid.stderr


def test_init_overwrites_nothing_without_force_in_one_sentence(tmp_path: Path) -> None:
    (tmp_path / "tuner.toml").write_text("# mine\n")
    proc = run("init", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "exists already" in proc.stderr and "--force" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tuner.toml"]  # nothing written, not even the others
    assert (tmp_path / "tuner.toml").read_text() == "# mine\n"
    assert run("init", "--force", str(tmp_path), cwd=tmp_path).returncode == 0


def test_a_directory_that_cannot_be_written_is_one_sentence(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    proc = run("init", str(tmp_path / "file" / "samples"), cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "cannot write the samples into" in proc.stderr


@needs_verify
def test_the_written_unit_verifies(tmp_path: Path) -> None:
    from tuner.cli.samples import text_of

    tuner = Path(sys.executable).parent / "tuner"
    unit = text_of(next(s for s in SAMPLES if s.name == "tuner.service"), tuner=tuner)
    assert f"ExecStart={tuner} daemon" in unit
    assert verify(tmp_path, unit) == []
