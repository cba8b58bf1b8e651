"""`pip install` of the built wheel gives a working `tuner` (issue #47 item 1): the wheel is built from this
checkout, installed into a fresh virtual environment outside the repository (pip's cache and index as configured
for this machine) and run from a directory outside the repository, so nothing can be read from the checkout."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.unit.test_systemd_unit import verify

from .conftest import processes_under, tuner_env

ROOT = Path(__file__).resolve().parent.parent.parent
QUICK = ROOT / "tests" / "fixtures" / "policies" / "good" / "faults.toml"


def _run(argv: list[str], cwd: Path, timeout: int, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, cwd=cwd, timeout=timeout, env=env or None)


def test_the_built_wheel_runs_a_sandbox_session_from_outside_the_repository(base_dir: Path, tmp_path: Path) -> None:
    dist, venv, work = tmp_path / "dist", tmp_path / "venv", tmp_path / "work"
    work.mkdir()
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(dist), str(ROOT)], work, 600)
    assert built.returncode == 0, built.stderr[-3000:]
    [wheel] = dist.glob("pg_io_tuner-*.whl")
    made = _run([sys.executable, "-m", "venv", str(venv)], work, 300)
    assert made.returncode == 0, made.stderr[-3000:]
    installed = _run([str(venv / "bin" / "pip"), "install", "--quiet", str(wheel)], work, 900)
    assert installed.returncode == 0, installed.stderr[-3000:]
    shutil.rmtree(dist)
    tuner = str(venv / "bin" / "tuner")
    env = tuner_env(tmp_path / "state", TUNER_SANDBOX__BASE_DIR=str(base_dir))

    where = _run([str(venv / "bin" / "python"), "-c", "from tuner.settings.policy import SHIPPED_POLICY_DIR as d; print(d)"],
                 work, 60, **env)
    assert Path(where.stdout.strip()).is_relative_to(venv), where.stdout + where.stderr
    version = _run([tuner, "--version"], work, 60, **env)
    assert version.returncode == 0 and "tuner" in version.stdout, version.stderr
    # The default policy, found inside the installed package: no tuner.toml, no policies/ in this directory.
    validate = _run([tuner, "config", "validate"], work, 60, **env)
    assert validate.returncode == 0, validate.stderr
    assert "defaults (no tuner.toml read); policy default" in validate.stderr
    for name in ("ssd", "network", "hdd"):
        other = _run([tuner, "config", "validate"], work, 60, **env, TUNER_TUNER__POLICY=name)
        assert other.returncode == 0, other.stderr

    _readme_pip_section(venv, work, env)

    quick = work / "quick.toml"  # a short session: the default policy's budget takes many minutes here
    shutil.copy(QUICK, quick)
    session = _run([tuner, "recommend", "--sandbox", "--scale", "1", "--family", "concurrency", "--policy", str(quick),
                    "--format", "json", "--no-store"], work, 900, **env)
    assert session.returncode == 0, session.stderr[-3000:]
    doc = json.loads(session.stdout)
    assert [f["family"] for f in doc["families"] if f["status"] == "done"] == ["concurrency"]
    assert not list(base_dir.iterdir()) and not processes_under(base_dir)


def _readme_pip_section(venv: Path, work: Path, env: dict[str, str]) -> None:
    """Issue #58 item 1: the README's pip section, as written, from a directory outside the repository — its
    venv path this test's, its `pip install pg-io-tuner` the wheel installed above — gives a working config, unit,
    rules and dashboard, judged by `tuner config validate`, `systemd-analyze verify` and `promtool`."""
    readme = (ROOT / "README.md").read_text().split("## Installing with pip", 1)[1]
    block = re.search(r"```bash\n(.*?)```", readme, re.S)
    assert block is not None, "the README's pip section has no commands"
    lines = [line.split("  #")[0].strip() for line in block.group(1).splitlines() if line.strip()]
    first, rest = lines[0], lines[1:]
    assert first.startswith("python3 -m venv /opt/tuner && /opt/tuner/bin/pip install pg-io-tuner"), first
    for line in rest:
        proc = subprocess.run(["bash", "-c", line.replace("/opt/tuner", str(venv))], capture_output=True, text=True,
                              cwd=work, timeout=120, env=env)
        assert proc.returncode == 0, f"{line}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}"
    samples = work / "tuner-samples"
    assert sorted(p.name for p in samples.iterdir()) == ["grafana-dashboard.json", "prometheus-rules.yml",
                                                         "tuner.service", "tuner.toml"]
    unit = (samples / "tuner.service").read_text()
    assert f"ExecStart={venv / 'bin' / 'tuner'} daemon" in unit  # the tuner that wrote it: this venv's
    json.loads((samples / "grafana-dashboard.json").read_text())
    if shutil.which("systemd-analyze"):
        assert verify(work, unit) == []
    if shutil.which("promtool"):
        rules = subprocess.run(["promtool", "check", "rules", str(samples / "prometheus-rules.yml")],
                               capture_output=True, text=True, timeout=120)
        assert rules.returncode == 0, rules.stdout + rules.stderr
