"""The readahead family on real block devices: a loop device (image file, ``losetup --direct-io=on``, ext4) holds a
tablespace of a writable staging clone (PostgreSQL 15, marked ``tuner.role = 'staging'``). Every device and mount
made here is put back and removed, also when a test fails.
"""

from __future__ import annotations

import json
import signal
import statistics
import subprocess
import sys
from pathlib import Path

from scipy.stats import mannwhitneyu

from tuner.hostfacts.blockdev import discover, postgres_paths
from tuner.target.connection import connect

from .conftest import Clone, clone_env, wait_for

_env = clone_env


def test_the_tablespace_on_the_loop_device_is_found(clone: Clone) -> None:
    ts = clone.disk.mnt / "ts"
    groups, untunable = discover(postgres_paths(clone.running.sandbox.primary_dir, {"fast": str(ts)}))
    loop = [g for g in groups if g.device.name == clone.disk.name]
    assert len(loop) == 1 and loop[0].tablespaces == ["fast"] and not loop[0].holds_data_directory
    assert loop[0].device.kind == "loop" and loop[0].device.read_ahead_kb() == 0
    assert loop[0].device.match["ATTR{loop/backing_file}"].endswith("disk.img")
    assert not untunable


def test_recommend_readahead_on_a_staging_clone(clone: Clone, tmp_path: Path) -> None:
    out_dir = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "tuner", "recommend", "--dsn", clone.dsn, "--family", "readahead",
         "--format", "json", "--output", str(out_dir)],
        capture_output=True, text=True, cwd=tmp_path, timeout=1200, env=_env(clone, tmp_path / "state"),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert clone.disk.read_ahead_kb() == 0  # put back
    assert not (tmp_path / "state" / "journal.json").exists()
    doc = json.loads(proc.stdout)
    assert doc["target"]["mode"] == "staging_clone"
    [fam] = doc["families"]
    assert fam["family"] == "readahead" and fam["status"] == "done", fam
    node = f"/dev/{clone.disk.name}"
    probed_devices = [d for d in doc["devices"] if d["status"] == "probed"]
    # Why not, first and short: CI shows only the start of a failed assertion's message.
    assert len(probed_devices) == 1, ([(d["device"], d["status"], d["reason"]) for d in doc["devices"]],
                                      [(t["config"], t["status"], t["reason"]) for t in doc["trials"]][:8],
                                      proc.stderr[-2000:])
    [probed] = probed_devices
    assert probed["device"] == node and probed["roles"] == ["tablespace fast"] and probed["read_ahead_kb"] == 0
    assert probed["raw_read_mb_s"] > 0 and probed["seq_scan_mb_s_recommended"] > probed["seq_scan_mb_s_current"]
    [ra] = [r for r in doc["recommendations"] if r["knob"] == "read_ahead_kb"]
    assert ra["scope"] == "device" and ra["object"] == node and ra["current"] == 0
    assert ra["decision"] == "change", ra
    assert ra["effect"]["ci95"][0] > 1.2
    k = ra["recommended"]
    assert ra["host"]["apply_blockdev"] == f"blockdev --setra {2 * k} {node}"
    assert ra["host"]["rollback_sysfs"] == f"echo 0 > /sys/block/{clone.disk.name}/queue/read_ahead_kb"
    assert 'ATTR{loop/backing_file}=="' in ra["host"]["udev_rule"] and f'ATTR{{queue/read_ahead_kb}}="{k}"' in ra["host"]["udev_rule"]
    # Near the optimum measured in this very run, not merely "larger": no readahead measured at least three times
    # beats the recommended one's sequential scans both by more than 25 % and clearly (one-sided Mann-Whitney,
    # p < 0.01). A bare "within 25 % of the best median" failed in CI on a true answer: probes here vary ~12 %
    # with outliers up to 2.5x, and the smallest of five medians of three probes is lucky by that much — the
    # winner's curse in the test itself. An answer on the slope (128 KiB when 2048 is 1.5x faster) still fails.
    ok = [t for t in doc["trials"] if t["status"] == "ok"]
    by_ra: dict[int, list[float]] = {}
    for t in ok:
        by_ra.setdefault(t["config"]["read_ahead_kb"], []).append(t["metrics"]["seq_scan_ms"])
    medians = {v: statistics.median(ts) for v, ts in by_ra.items() if len(ts) >= 3}
    assert k in medians, (k, medians)
    beaten = {
        v: (m, mannwhitneyu(by_ra[v], by_ra[k], alternative="less").pvalue)
        for v, m in medians.items() if m * 1.25 < medians[k]
    }
    assert all(p >= 0.01 for _, p in beaten.values()), (k, medians, beaten)
    assert medians[0] > 2 * medians[k]
    # effective_io_concurrency was searched jointly: for this tablespace, to run on the primary.
    eic = [r for r in doc["recommendations"] if r["knob"] == "effective_io_concurrency"]
    assert all(r["scope"] == "tablespace" and r["object"] == "fast" and r["run_on"] == "primary" for r in eic)
    assert "jointly" in probed["reason"]
    assert (out_dir / "99-tuner-readahead.rules").read_text().count("ATTR{queue/read_ahead_kb}") == 1
    assert f"blockdev --setra 0 {node}" in (out_dir / "readahead-rollback.sh").read_text()
    assert any("read_ahead_kb" in line for line in doc["restored"])


def _start_until_changed(clone: Clone, tmp_path: Path, state: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """Start a readahead session and return once it has changed the device (its stderr goes to a file)."""
    log = tmp_path / "stderr.log"
    with log.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tuner", "recommend", "--dsn", clone.dsn, "--family", "readahead"],
            stdout=subprocess.DEVNULL, stderr=err, cwd=tmp_path, env=_env(clone, state),
        )
    if not wait_for(lambda: clone.disk.read_ahead_kb() != 0, 300):
        proc.kill()
        proc.wait(timeout=30)
        raise AssertionError(log.read_text()[-2000:])
    return proc, log


def _start_and_kill(clone: Clone, tmp_path: Path, state: Path) -> None:
    """Start a readahead session, SIGKILL it once it has changed the device, and check what it left behind."""
    proc, _ = _start_until_changed(clone, tmp_path, state)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert clone.disk.read_ahead_kb() != 0  # left changed: nothing ran after SIGKILL
    doc = json.loads((state / "journal.json").read_text())
    [entry] = doc["changes"]
    assert entry["device"] == f"/dev/{clone.disk.name}" and entry["original"] == "0"


def test_tuner_restore_after_sigkill_puts_the_device_back(clone: Clone, tmp_path: Path) -> None:
    state = tmp_path / "state"
    try:
        _start_and_kill(clone, tmp_path, state)
        proc = subprocess.run([sys.executable, "-m", "tuner", "restore"], capture_output=True, text=True,
                              cwd=tmp_path, timeout=60, env=_env(clone, state))
        assert proc.returncode == 0, proc.stderr
        assert f"/dev/{clone.disk.name}: read_ahead_kb" in proc.stdout and "-> 0 (restored)" in proc.stdout
        assert clone.disk.read_ahead_kb() == 0
        assert not (state / "journal.json").exists()
        again = subprocess.run([sys.executable, "-m", "tuner", "restore"], capture_output=True, text=True,
                               cwd=tmp_path, timeout=60, env=_env(clone, state))
        assert again.returncode == 0 and "nothing to restore" in again.stderr
    finally:
        clone.disk.set_read_ahead_kb(0)


def test_the_next_start_restores_what_a_killed_session_left(clone: Clone, tmp_path: Path) -> None:
    state = tmp_path / "state"
    try:
        _start_and_kill(clone, tmp_path, state)
        # A session of another family that touches no device still restores the journal first.
        proc = subprocess.run(
            [sys.executable, "-m", "tuner", "recommend", "--dsn", clone.dsn, "--family", "concurrency",
             "--budget", "3", "--format", "json"],
            capture_output=True, text=True, cwd=tmp_path, timeout=600, env=_env(clone, state),
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert clone.disk.read_ahead_kb() == 0
        doc = json.loads(proc.stdout)
        assert any(line.startswith("left by an earlier session") and "-> 0 (restored)" in line for line in doc["restored"])
        assert not (state / "journal.json").exists()
    finally:
        clone.disk.set_read_ahead_kb(0)


def test_a_target_whose_data_directory_is_elsewhere_skips_readahead(clone: Clone, tmp_path: Path) -> None:
    """A role that may not see the data directory is what tuner sees of a server on another host: no pg_control
    to compare, so readahead is skipped with one sentence and the run still succeeds."""
    async def make_role() -> None:
        conn = await connect(clone.dsn)
        try:
            # It may read pg_file_settings and stat the configuration files (the interlock checks where the marker
            # comes from and that the file on disk is the one loaded), not the data_directory setting.
            await conn.execute("DROP ROLE IF EXISTS remote_tuner; CREATE ROLE remote_tuner LOGIN; "
                               "GRANT SELECT ON pg_file_settings TO remote_tuner; "
                               "GRANT EXECUTE ON FUNCTION pg_show_all_file_settings(), pg_stat_file(text, boolean), "
                               "pg_read_file(text, bigint, bigint, boolean) TO remote_tuner; "
                               "GRANT pg_read_server_files TO remote_tuner")
        finally:
            await conn.close()

    clone.running.run(make_role())
    dsn = clone.dsn.replace("postgres@", "remote_tuner@")
    proc = subprocess.run(
        [sys.executable, "-m", "tuner", "recommend", "--dsn", dsn, "--family", "readahead", "--format", "json"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300, env=_env(clone, tmp_path / "state"),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    [fam] = doc["families"]
    assert fam["status"] == "skipped" and "not running on the staging host" in fam["reason"], fam
    assert "\n" not in fam["reason"] and doc["recommendations"] == []
    assert clone.disk.read_ahead_kb() == 0


def test_sigterm_mid_session_puts_the_device_back_at_once(clone: Clone, tmp_path: Path) -> None:
    state = tmp_path / "state"
    try:
        proc, log = _start_until_changed(clone, tmp_path, state)
        try:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 143, log.read_text()[-2000:]
        assert clone.disk.read_ahead_kb() == 0
        assert not (state / "journal.json").exists()
        assert "Traceback" not in log.read_text()
    finally:
        clone.disk.set_read_ahead_kb(0)
