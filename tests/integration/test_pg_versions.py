"""Whole ``tuner recommend --sandbox --pg-version N`` sessions on the provider's servers (small scale, quick
policies): 17 (per-buffer eviction, io_combine_limit up to 32), 19 (no io_workers; its worker pool sizes itself),
and Debian's 18, built with liburing, where io_method = io_uring is screened live."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import processes_under, tuner_env

POLICIES = Path(__file__).parent.parent / "fixtures" / "policies" / "good"


def _recommend(base_dir: Path, tmp_path: Path, major: int, policy: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "tuner", "recommend", "--sandbox", "--pg-version", str(major), "--scale", "1",
         "--budget", "6", "--family", "concurrency", "--policy", str(POLICIES / policy), "--format", "json"],
        capture_output=True, text=True, cwd=tmp_path, timeout=1200,
        env=tuner_env(tmp_path / "state", TUNER_SANDBOX__BASE_DIR=str(base_dir)),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not list(base_dir.iterdir()) and not processes_under(base_dir)
    doc: dict[str, Any] = json.loads(proc.stdout)
    assert doc["target"]["server_version_num"] // 10000 == major
    ok = [t for t in doc["trials"] if t["status"] == "ok"]
    assert ok and all(t["cache"]["heap_read"] > 0 for t in ok)
    assert all(t["cache"]["io_read_time_ms"] is not None for t in ok)  # "Shared I/O Read Time" on 17+
    return doc


@pytest.mark.parametrize("major", [17, 19])
def test_a_sandbox_session_runs_on_the_provided_version(base_dir: Path, tmp_path: Path, major: int,
                                                        provided) -> None:  # type: ignore[no-untyped-def]
    provided(major)  # built (or found in the cache) before the session's own clock starts
    doc = _recommend(base_dir, tmp_path, major, "aio_quick.toml")
    recs = {r["knob"]: r for r in doc["recommendations"]}
    assert recs["effective_io_concurrency"]["current"] == (1 if major == 17 else 16)
    # 17's read streams combine up to io_combine_limit (1..32); 18+ caps it at io_max_combine_limit (16 by default).
    assert "io_combine_limit" in recs
    [fam] = doc["families"]
    assert fam["status"] == "done", fam
    # pg_stat_io (16+) around every probe: the sandbox's probe read what EXPLAIN said it read from outside shared
    # buffers; 19's EXPLAIN (IO) gives each scan's read stream, and pg_stat_io (18+) the bytes per read.
    ok = [t for t in doc["trials"] if t["status"] == "ok"]
    assert all(t["metrics"]["stat_io_reads"] > 0 for t in ok), [t["metrics"] for t in ok]
    if major >= 19:
        assert all(t["metrics"]["bitmap_io_count"] > 0 and t["metrics"]["bitmap_prefetch_distance_max"] >= 1
                   and t["metrics"]["stat_io_bytes_per_read"] >= 8192 for t in ok), [t["metrics"] for t in ok]
    else:
        assert not any("stat_io_bytes_per_read" in t["metrics"] or "bitmap_io_count" in t["metrics"] for t in ok)
    if major == 17:
        # No pg_buffercache_evict_relation before 18: each buffer is evicted on its own (pg_buffercache_evict, 17).
        assert "evicted (pg_buffercache_evict)" in doc["session"]["cache"], doc["session"]["cache"]
        assert recs["io_combine_limit"]["searched"] == [1, 32]  # PG_IOV_MAX on 17, no io_max_combine_limit cap
        assert "io_method" not in recs
    else:
        assert "pg_buffercache_evict_relation" in doc["session"]["cache"]
        assert recs["io_method"]["current"] == "worker"
        # 19 has no io_workers (its pool sizes itself between io_min_workers and io_max_workers): never searched.
        assert "io_workers" not in recs and not any("io_workers" in t["config"] for t in doc["trials"])


@pytest.mark.parametrize("argv, extra, said", [
    (["--pg-version", "12"], {}, "tuner: error: PostgreSQL 12 is not a version tuner can provide"),
    (["--pg-version", "19"], {"TUNER_SANDBOX__BIN_DIR": "/usr/lib/postgresql/15/bin"},
     "tuner: error: [sandbox] bin_dir holds PostgreSQL 15."),
])
def test_a_version_that_cannot_be_had_is_one_sentence_and_exit_2(base_dir: Path, tmp_path: Path, argv: list[str],
                                                                  extra: dict[str, str], said: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "tuner", "recommend", "--sandbox", "--scale", "1", *argv],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300,
                          env=tuner_env(tmp_path / "state", TUNER_SANDBOX__BASE_DIR=str(base_dir), **extra))
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if not line.startswith("{")]
    assert lines[0].startswith(said) and lines[1].startswith("hint: ") and len(lines) == 2, proc.stderr
    assert "Traceback" not in proc.stderr and not list(base_dir.iterdir())


def test_io_uring_is_screened_live_on_debians_liburing_build(base_dir: Path, tmp_path: Path,
                                                              pg18_debian) -> None:  # type: ignore[no-untyped-def]
    doc = _recommend(base_dir, tmp_path, 18, "io_uring_quick.toml")
    uring = [t for t in doc["trials"] if t["config"].get("io_method") == "io_uring"]
    assert uring and all(t["status"] == "ok" for t in uring), uring
    rec = {r["knob"]: r for r in doc["recommendations"]}["io_method"]
    assert rec["current"] == "worker" and rec["decision"] in ("change", "keep")
    assert any("io_method" in line for line in doc["restored"])  # journaled, then put back
    [fam] = doc["families"]
    assert "io_uring not screened" not in fam["reason"], fam["reason"]  # nothing here stops it (tuner checked)
    # pg_stat_io's bytes per read (18+) under both methods: the evidence beside each time
    for method in ("worker", "io_uring"):
        ok = [t for t in doc["trials"] if t["status"] == "ok" and t["config"].get("io_method") == method]
        assert ok and all(t["metrics"]["stat_io_bytes_per_read"] >= 8192 for t in ok), [t["metrics"] for t in ok]


def test_19_s_io_max_workers_is_searched_only_where_the_pool_grew_to_it(base_dir: Path, tmp_path: Path,
                                                                       provided) -> None:  # type: ignore[no-untyped-def]
    provided(19)
    doc = _recommend(base_dir, tmp_path, 19, "io_pool_quick.toml")
    ok = [t for t in doc["trials"] if t["status"] == "ok"]
    grew = max(t["metrics"]["io_workers_running"] for t in ok)  # seen after every probe on 19
    assert 1 <= grew <= 32
    [fam] = doc["families"]
    searched = [t for t in doc["trials"] if "io_max_workers" in t["config"]]
    if "io_max_workers not searched: the I/O worker pool grew to at most" in fam["reason"]:
        assert not searched and grew < 8, fam["reason"]
    else:  # it filled: searched, journaled and put back
        assert searched and grew >= 8, fam["reason"]
        assert any("io_max_workers" in line for line in doc["restored"]), doc["restored"]
