"""The whole ``tuner recommend --sandbox`` path, as a user runs it, on PostgreSQL 15 and 18."""

from __future__ import annotations

import json
import re
import signal
import statistics
import subprocess
import sys
from pathlib import Path

from tuner.sandbox import Binaries, cleanup_stale

from .conftest import processes_under, tuner_env, wait_for


def _env(base_dir: Path, state: Path, **extra: str) -> dict[str, str]:
    """A state directory of the test's own (never the machine's /var/lib/tuner), the suite's sandbox base dir."""
    return tuner_env(state, TUNER_SANDBOX__BASE_DIR=str(base_dir), **extra)


def test_recommend_on_a_pg15_sandbox_end_to_end(base_dir: Path, tmp_path: Path) -> None:
    out_dir = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "tuner", "recommend", "--sandbox", "--scale", "4", "--budget", "8",
         "--family", "readahead", "--family", "concurrency", "--format", "json", "--output", str(out_dir)],
        capture_output=True, text=True, cwd=tmp_path, timeout=900, env=_env(base_dir, tmp_path / "state"),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc == json.loads((out_dir / "report.json").read_text())
    assert doc["schema_version"] == 1
    # The decision policy's values are carried by the report (issue #45 item 5): the default policy's here.
    assert doc["min_effect"] == 1.05 and doc["alpha"] == 0.05
    assert doc["target"]["in_recovery"] is True and doc["target"]["server_version_num"] // 10000 == 15
    [rec] = [r for r in doc["recommendations"] if r["knob"] == "effective_io_concurrency"]
    assert rec["scope"] == "system" and rec["current"] == 1
    assert rec["decision"] in ("change", "keep")
    if rec["decision"] == "change":
        lo, hi = rec["effect"]["ci95"]
        assert hi >= rec["effect"]["improvement"] >= lo > 1.05
        assert rec["apply_sql"] == f"ALTER SYSTEM SET effective_io_concurrency = {rec['recommended']};"
        assert rec["rollback_sql"] == "ALTER SYSTEM RESET effective_io_concurrency;"
    # The read path as one search (issue #53): readahead x effective_io_concurrency on the sandbox's own disk, one
    # confirmation of the combination; the concurrency family (eic's owner) recommends from it and probes nothing.
    ok = [t for t in doc["trials"] if t["status"] == "ok"]
    assert len(ok) >= 8 and doc["session"]["probes"] == len(doc["trials"])
    assert all(t["family"] == "readahead" and "effective_io_concurrency" in t["config"] for t in doc["trials"])
    fams = {f["family"]: f for f in doc["families"]}
    assert fams["readahead"]["cache"] == "shared buffers: restart; OS page cache: drop_caches"
    assert "searched and confirmed with read_ahead_kb" in fams["concurrency"]["reason"], fams["concurrency"]
    assert rec["reason"].startswith("searched and confirmed with read_ahead_kb = ")
    confirmed = [t for t in ok if t["phase"] == "confirm" and t["arm"] == "candidate"]
    # The pair recommended is the pair measured: the combination's candidate arm ran at both recommended values.
    assert any(t["config"]["effective_io_concurrency"] == rec["recommended"] for t in confirmed) or not confirmed
    # As root the sandbox lives on a loop device of its own: the readahead family tunes that one, and only it.
    assert fams["readahead"]["status"] == "done", fams["readahead"]
    [dev] = doc["devices"]
    assert dev["device"].startswith("/dev/loop") and dev["status"] == "probed" and "data directory" in dev["roles"]
    [ra] = [r for r in doc["recommendations"] if r["knob"] == "read_ahead_kb"]
    assert ra["object"] == dev["device"] and ra["current"] == dev["read_ahead_kb"]
    assert any(line.startswith(dev["device"]) for line in doc["restored"])
    assert "drop_caches" in doc["session"]["cache"]
    assert all(t["cache"]["heap_read"] > 0 and t["value"] > 0 for t in ok)
    # The physical effect behind the recommendation: on this machine, 1 is always the slowest setting.
    by_value: dict[int, list[float]] = {}
    for t in ok:
        by_value.setdefault(t["config"]["effective_io_concurrency"], []).append(t["value"])
    high = [v for k, vs in by_value.items() if k >= 16 for v in vs]
    assert statistics.median(by_value[1]) > statistics.median(high)
    # One JSON log line per probe on stderr (not a terminal).
    probe_lines = [json.loads(line) for line in proc.stderr.splitlines() if line.startswith("{") and '"probe"' in line]
    assert len(probe_lines) == len(doc["trials"])
    assert (out_dir / "recommendation.sql").read_text().startswith("-- tuner recommendation")
    # The near-optimal range (issue #39): inside the range searched and around a changed answer; an answer at
    # the edge of what was searched is marked in the table and said in a sentence, and only then.
    text = (out_dir / "report.txt").read_text()
    for r in (rec, ra):
        low, high = r["searched"]
        assert r["at_edge"] == ("upper" if r["recommended"] == high else "lower" if r["recommended"] == low else None)
        if r["decision"] == "change":
            assert r["near_optimal"] is not None
            assert low <= r["near_optimal"][0] <= r["recommended"] <= r["near_optimal"][1] <= high
            if not r["together_with"]:  # one knob moved: the pairs told today's value apart from the answer
                assert not r["near_optimal"][0] <= r["current"] <= r["near_optimal"][1]
        if r["at_edge"]:
            assert f"at the edge: {r['recommended']} is the" in text and f"{r['recommended']} (edge)" in text
    assert ("at the edge" in text) == any(r["at_edge"] for r in doc["recommendations"])
    assert ("plateau from" in text) == any(r["plateau"] for r in doc["recommendations"])
    # Stored, so the HTML report has its target's history (this sandbox's first and only session).
    html = (out_dir / "report.html").read_text()
    assert "Over sessions" in html and "the history starts here" in html
    # The session's own report, read back from the store, fits the terminal it is shown on (issue #47 item 4),
    # decisions coloured only when asked for.
    for columns in ("100", "64"):
        shown = subprocess.run([sys.executable, "-m", "tuner", "show", "latest", "--color", "always"],
                               capture_output=True, text=True, cwd=tmp_path, timeout=120,
                               env=_env(base_dir, tmp_path / "state", COLUMNS=columns))
        assert shown.returncode == 0, shown.stderr
        plain = re.sub(r"\x1b\[[0-9;]*m", "", shown.stdout)
        assert max(len(line) for line in plain.splitlines()) <= int(columns), plain
        # no figure cut short; a per-query table's query text is elided with "…" by design, so only the tables
        # above it are checked
        assert "\x1b[" in shown.stdout and "…" not in plain.split("per query:")[0]
        assert all(r["knob"] in plain for r in doc["recommendations"])
    assert not list(base_dir.iterdir()) and not processes_under(base_dir)


def test_the_read_path_on_pg18_is_one_search_whose_settled_values_the_owner_measures_at(
        base_dir: Path, tmp_path: Path, pg18: Binaries) -> None:
    """Issue #53 on 18: readahead x effective_io_concurrency searched by the readahead family on the sandbox's own
    disk and confirmed as a pair; the concurrency family recommends eic from that, and probes io_combine_limit,
    io_workers and io_method at the eic settled — never at another."""
    proc = subprocess.run(
        [sys.executable, "-m", "tuner", "recommend", "--sandbox", "--scale", "2", "--family", "readahead",
         "--family", "concurrency", "--format", "json",
         "--policy", str(Path(__file__).parent.parent / "fixtures" / "policies" / "good" / "read_path_quick.toml")],
        capture_output=True, text=True, cwd=tmp_path, timeout=900,
        env=_env(base_dir, tmp_path / "state", TUNER_SANDBOX__BIN_DIR=str(pg18.bin_dir)),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["target"]["server_version_num"] // 10000 == 18
    fams = {f["family"]: f for f in doc["families"]}
    assert fams["readahead"]["status"] == fams["concurrency"]["status"] == "done", fams
    recs = {r["knob"]: r for r in doc["recommendations"]}
    assert {"read_ahead_kb", "effective_io_concurrency", "io_combine_limit", "io_workers"} <= set(recs)
    eic = recs["effective_io_concurrency"]
    assert eic["reason"].startswith("searched and confirmed with read_ahead_kb = "), eic["reason"]
    settled = eic["recommended"] if eic["decision"] == "change" else eic["current"]
    by_family: dict[str, list[dict]] = {}
    for t in doc["trials"]:
        by_family.setdefault(t["family"], []).append(t)
    assert all("read_ahead_kb" in t["config"] and "effective_io_concurrency" in t["config"]
               for t in by_family["readahead"])
    # The owner searched what is its own at the value the read path settled: every one of its probes ran at it.
    assert by_family["concurrency"] and {t["config"]["effective_io_concurrency"] for t in by_family["concurrency"]} \
        == {settled}
    assert any("io_combine_limit" in t["config"] for t in by_family["concurrency"])
    assert not list(base_dir.iterdir()) and not processes_under(base_dir)


def test_recommend_on_a_pg18_sandbox(base_dir: Path, tmp_path: Path, pg18: Binaries) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tuner", "recommend", "--sandbox", "--scale", "2", "--budget", "6", "--family", "concurrency",
         "--policy", str(Path(__file__).parent.parent / "fixtures" / "policies" / "good" / "aio_quick.toml"),
         "--format", "json"],
        capture_output=True, text=True, cwd=tmp_path, timeout=900,
        env=_env(base_dir, tmp_path / "state", TUNER_SANDBOX__BIN_DIR=str(pg18.bin_dir)),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["target"]["server_version_num"] // 10000 == 18
    rec = doc["recommendations"][0]
    assert rec["current"] == 16  # the PG 18 default
    assert "evicted (pg_buffercache_evict_relation)" in doc["session"]["cache"]  # no restart between probes
    ok = [t for t in doc["trials"] if t["status"] == "ok"]
    assert ok and all(t["cache"]["heap_read"] > 0 for t in ok)
    assert all(t["cache"]["io_read_time_ms"] is not None for t in ok)  # "Shared I/O Read Time" on 18
    assert not list(base_dir.iterdir()) and not processes_under(base_dir)


def test_sigterm_mid_session_stops_and_removes_the_sandbox(base_dir: Path, tmp_path: Path) -> None:
    log = tmp_path / "stderr.log"
    with log.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tuner", "recommend", "--sandbox", "--scale", "2"],
            stdout=subprocess.PIPE, stderr=err, cwd=tmp_path, env=_env(base_dir, tmp_path / "state"), text=True,
        )
    try:
        assert wait_for(lambda: '"probe"' in log.read_text(), 300), log.read_text()[-2000:]
        assert processes_under(base_dir)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, log.read_text()[-2000:]
    assert "stopped by SIGTERM" in log.read_text()
    assert "Traceback" not in log.read_text()
    assert not list(base_dir.iterdir()) and not processes_under(base_dir)


def test_a_sandbox_left_by_a_killed_tuner_is_removed_next_time(base_dir: Path, tmp_path: Path, pg15: Binaries) -> None:
    script = (
        "import asyncio, sys\n"
        "from pathlib import Path\n"
        "from tuner.sandbox import Sandbox, find_binaries\n"
        "async def main():\n"
        f"    sb = Sandbox(base_dir=Path({str(base_dir)!r}), scale=1, binaries=find_binaries(Path({str(pg15.bin_dir)!r})))\n"
        "    await sb.start()\n"
        "    print('up', flush=True)\n"
        "    await asyncio.sleep(600)\n"
        "asyncio.run(main())\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "up"
        assert processes_under(base_dir)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert list(base_dir.iterdir())  # left behind, servers still running
    removed = cleanup_stale(base_dir)
    assert len(removed) == 1
    assert wait_for(lambda: not processes_under(base_dir), 30)
    assert not list(base_dir.iterdir())
