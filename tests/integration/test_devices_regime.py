"""The report's I/O regime on emulated disks (issue #46 part 4): a real sandbox session on PostgreSQL 15, its data
device's counters read around every probe, and the line that says what limits the reads — the cap on an IOPS-capped
disk, latency on a disk where each read waits 1 ms."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.integration.conftest import processes_under, tuner_env, wait_for
from tuner.sandbox import loopdisk
from tuner.sandbox.device import parse_profile
from tuner.sandbox.device.throttle import cgroup_root


def _left(base_dir: Path, sandbox: str) -> list[object]:
    """What of this session's sandbox is still there: its cgroup (by its own name: other engineers' sandboxes may
    run beside it), mounts, loop devices and processes under ``base_dir``."""
    root = cgroup_root()
    cgroups = [p.name for p in root[0].glob(f"tuner-{sandbox}")] if root else []
    mounts = [ln for ln in Path("/proc/self/mounts").read_text().splitlines() if str(base_dir) in ln]
    return [x for x in (cgroups, mounts, loopdisk.backed_by(base_dir), processes_under(base_dir)) if x]


def _session(base_dir: Path, tmp_path: Path, device: str, *, report: dict[str, Any] | None = None) -> dict[str, Any]:
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "tuner", "recommend", "--sandbox", "--scale", "2", "--device", device,
         "--family", "concurrency", "--budget", "6", "--seed", "46", "--format", "table", "--no-store",
         "--output", str(out)],
        capture_output=True, text=True, cwd=tmp_path, timeout=900,
        env=tuner_env(tmp_path / "state", TUNER_SANDBOX__BASE_DIR=str(base_dir)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc: dict[str, Any] = json.loads((out / "report.json").read_text())
    print(proc.stdout)
    assert doc["device_profile"] == parse_profile(device).described  # a shorthand is spelled out: gp3 = latency=…
    [regime] = doc["io_regime"]
    assert regime["family"] == "concurrency" and regime["device"].startswith("loop"), regime
    assert f"I/O regime (concurrency): {regime['sentence']}" in " ".join(proc.stdout.split())
    assert 'data-figure="io-regime"' in (out / "report.html").read_text()
    ok = [t for t in doc["trials"] if t["status"] == "ok"]
    assert ok and all(t["metrics"]["disk_reads"] > 0 for t in ok)  # every probe's scans read the loop device
    sandbox = Path(next(json.loads(ln)["dir"] for ln in proc.stderr.splitlines()
                        if '"sandbox.removed"' in ln)).name
    assert wait_for(lambda: not _left(base_dir, sandbox), 30), _left(base_dir, sandbox)
    if report is not None:
        report.update(doc)
    return regime  # type: ignore[no-any-return]


def test_on_an_iops_capped_disk_the_regime_line_names_the_cap(base_dir: Path, tmp_path: Path) -> None:
    regime = _session(base_dir, tmp_path, "iops=300")
    assert regime["regime"] == "iops" and regime["cap_iops"] == 300 and regime["cap_source"] == "profile", regime
    assert 0.8 * 300 <= regime["read_iops"] <= 1.2 * 300, regime  # measured on the loop device, not assumed
    assert "cap of 300 IOPS" in regime["sentence"] and "no setting raises that" in regime["sentence"]


def test_on_a_disk_where_each_read_waits_1ms_the_regime_is_latency_bound(base_dir: Path, tmp_path: Path) -> None:
    regime = _session(base_dir, tmp_path, "latency=1ms")
    assert regime["regime"] == "latency", regime
    assert regime["read_latency_ms"] >= 0.9, regime  # the layer's 1 ms shows in the loop's own read times
    assert regime["peak_read_iops"] >= 2 * regime["read_iops"], regime  # more reads at once went faster
    assert "room for more concurrency" in regime["sentence"]


def test_on_a_disk_that_serves_one_read_at_a_time_more_reads_at_once_never_raise_the_rate(base_dir: Path,
                                                                                           tmp_path: Path) -> None:
    # hdd: one spindle, reads served one at a time, each a few ms of seek and rotation. The queue builds at the
    # device as on a real volume at its provider's cap (not before it, as under blk-throttle): deeper prefetch
    # puts more reads in flight and the rate stays flat. The profile names no cap, so the line must infer it —
    # what tuner does on a real target. One spindle's rate: a non-contiguous read costs 1 ms + a seek that grows
    # with distance + 4.17 ms of rotation (the profile's model), so at most ~190 such reads a second, more where
    # reads are contiguous (measured in the devices benchmark: 199-209 inferred, 5.0 ms per read one at a time).
    #
    # What the spindle guarantees is that more reads at once never read faster — not that the rates are even. The
    # spindle is a FUSE helper: on a loaded machine (sandbox sessions beside it) its threads wake late, some reads
    # take longer, deeper probes with more threads contending most (issue 59: 163 IOPS at 6.11 ms per read today,
    # 140 IOPS deeper). Rates that uneven are not called a cap, by design (rule 2 wants them flat within FLAT);
    # the line then says what was measured (rule 4). Either way it never promises room for more concurrency.
    doc: dict[str, Any] = {}
    regime = _session(base_dir, tmp_path, "hdd", report=doc)
    assert regime["peak_read_iops"] <= 300, regime  # no probe, however deep, beat one spindle
    # The line describes today's eic 1 where probes ran at it (a confirmation's baseline arm, or the search's);
    # a session that kept 1 on a measured plateau without probing it is described by all its probes.
    if any(t["status"] == "ok" and t["config"].get("effective_io_concurrency") == 1 for t in doc["trials"]):
        assert regime["reads_in_flight"] <= 1.5, regime  # today's eic: one read at a time
    assert regime["busy_share"] >= 0.5, regime  # the spindle, not the CPU, is what the reads waited for
    assert "room for more concurrency" not in regime["sentence"], regime
    if regime["regime"] == "iops":  # rates even enough to infer the cap: today's rate is already at it
        assert regime["cap_source"] == "inferred" and 120 <= regime["cap_iops"] <= 300, regime
        assert regime["cap_iops"] <= 1.25 * regime["read_iops"], regime
        assert "the device's ceiling is about" in regime["sentence"]
    else:
        assert regime["regime"] == "latency", regime
        assert "ran at" in regime["sentence"] and "not faster: more reads at once did not raise the rate here" in \
            regime["sentence"], regime


def test_on_gp3_one_read_at_a_time_the_line_names_the_latency_as_the_binding_limit(base_dir: Path,
                                                                                     tmp_path: Path) -> None:
    # gp3 = 800 us per read, 3,000 IOPS, 125 MiB/s (tuner/sandbox/device/cloud.py). Today's eic 1 keeps about one
    # read in flight, ~1 ms each: ~1,000 IOPS, a third of the cap — the latency binds, not the cap, and the line
    # must say which of the three it is (issue #54).
    regime = _session(base_dir, tmp_path, "gp3")
    # Today's arm is eic 1 (the confirmation's baseline): one read at a time cannot reach 2,400 IOPS at 0.8 ms each.
    assert regime["regime"] == "latency" and regime["binding"] == "latency", regime
    assert regime["read_iops"] < 0.8 * 3000 and regime["read_latency_ms"] >= 0.7, regime  # the layer's 800 us shows
    assert "of gp3's limits (0.8 ms per read, 3,000 IOPS, 125 MiB/s), the latency binds" in \
        regime["sentence"], regime
