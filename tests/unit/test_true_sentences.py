"""Issue 59: sentences that said something other than what happened, each through a real `python -m tuner` on real
files: one clear sentence and a hint, exit 2 (or 0), never a traceback, nothing changed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.unit.hostile import Input

import pytest

REPO = Path(__file__).resolve().parents[2]
REPORT = REPO / "tests" / "fixtures" / "reports" / "sandbox-all-families.json"


def tuner(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "TUNER_"))}
    return subprocess.run([sys.executable, "-m", "tuner", *args], capture_output=True, text=True, cwd=tmp_path,
                          timeout=120, env={**clean, "TUNER_TUNER__STATE_DIR": str(tmp_path / "state"), **env})


def said(out: subprocess.CompletedProcess[str], code: int = 2) -> str:
    """The one error sentence of a refused command."""
    assert out.returncode == code and "Traceback" not in out.stderr, (out.returncode, out.stderr[-2000:])
    [sentence] = [line for line in out.stderr.splitlines() if line.startswith("tuner: error:")]
    assert any(line.startswith("hint:") for line in out.stderr.splitlines()), out.stderr
    return sentence


@pytest.mark.parametrize("host", ["LOCALHOST", "LocalHost", "localhost."])
def test_localhost_in_any_case_is_a_loopback_address(tmp_path: Path, host: str) -> None:
    (tmp_path / "tuner.toml").write_text(f'[daemon]\nlisten = "{host}:8187"\n')
    out = tuner(tmp_path, "config", "validate", "--config", "tuner.toml")
    assert out.returncode == 0 and "not a loopback address" not in out.stderr, out.stderr[-2000:]


@pytest.mark.parametrize("where", ["schema_version", "a recommendation's current value", "a trial's value"])
def test_json_true_where_a_number_belongs_is_no_report(tmp_path: Path, where: str) -> None:
    doc = json.loads(REPORT.read_text())
    if where == "schema_version":
        doc["schema_version"] = True
    elif where == "a trial's value":
        doc["trials"][0]["value"] = True
    else:
        doc["recommendations"][1]["current"] = True
    (tmp_path / "report.json").write_text(json.dumps(doc))
    sentence = said(tuner(tmp_path, "export", "--format", "json", "--from", "report.json"))
    assert "is not a tuner report" in sentence and "true or false where a number belongs" in sentence, sentence


def test_an_empty_from_says_it_is_empty(tmp_path: Path) -> None:
    sentence = said(tuner(tmp_path, "export", "--format", "json", "--from", ""))
    assert sentence == "tuner: error: --from is empty", sentence


def test_a_host_no_resolver_takes_is_one_sentence(tmp_path: Path) -> None:
    sentence = said(tuner(tmp_path, "check", "--dsn", f"host={'a' * 100_000} dbname=x"))
    assert "has a host that is no host name: longer than 253 characters" in sentence and "idna" not in sentence
    assert len(sentence) < 300
    sentence = said(tuner(tmp_path, "check", "--family", "concurrency", PGHOST="a" * 100_000))
    assert sentence.startswith("tuner: error: PGHOST has a host that is no host name"), sentence


# The hostile-input suite's registry (tests/unit/hostile.py): each distinct input above, counted once.
INPUTS = [
    *[Input(f"listen-{h}", "config", f'[daemon]\nlisten = "{h}:8187"') for h in ("LOCALHOST", "LocalHost", "localhost.")],
    *[Input(f"report-bool-{w.replace(' ', '-')}", "report", f"sandbox-all-families.json with true as {w}")
      for w in ("schema_version", "a recommendation's current value", "a trial's value")],
    Input("from-empty", "cli", "export --from ''"),
    Input("dsn-host-100k", "dsn", "host=" + "a" * 32 + "... (100,000 characters) dbname=x"),
    Input("pghost-100k", "environment", "PGHOST=" + "a" * 32 + "... (100,000 characters)"),
]
