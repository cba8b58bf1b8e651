"""What limits a workload's reads (issue #46 part 4): the data device's counters around a probe (tuner.probes.diskstat)
and the regime they put the workload in (tuner.core.regime), carried by the JSON report, the table, the HTML panel.

The probes' figures below have the shapes measured on the sandbox's loop device under each profile (see
docs/devices.md, "What limits the reads"): an IOPS cap pins the loop's rate with short per-read times (blk-throttle
holds bios before the loop's queue); a latency layer gives ~1 ms per read and a rate that climbs with reads in
flight; a real capped volume queues at the device, so its rate is flat while latency and reads in flight grow."""

from __future__ import annotations

from tests.unit.hostile import Input

import os
import re
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tuner.core.regime import assess, classify
from tuner.sandbox.device.profile import parse_profile
from tuner.emit.html import to_html
from tuner.emit.json import parse, to_dict
from tuner.emit.table import TableReport
from tuner.report.model import FamilyOutcome, IoRegimeOut, Report, SessionOut, TargetOut, Trial
from tuner.probes import diskstat
from tuner.probes.diskstat import DiskReader, DiskStat, DiskWindow, data_disk, figures
from tuner.report.validate import ReportError, check

T0 = datetime(2026, 12, 6, 17, 0, tzinfo=UTC)
# /sys/block/loop3/stat as Linux 6.18 writes it (17 fields), read on this machine.
STAT_LINE = ("  5304265   126853 280971378 13603426  4430641   254503 186726368  1747437        0  1873596 15852655"
             "      211        0 404685268       47  1964553   501743\n")


# ---- the counters -------------------------------------------------------------------------------------------

def test_a_stat_line_gives_reads_sectors_read_ticks_io_ticks_and_time_in_queue() -> None:
    s = DiskStat.parse(STAT_LINE)
    assert (s.reads, s.sectors_read, s.read_ms, s.io_ticks_ms, s.time_in_queue_ms) == \
        (5304265, 280971378, 13603426, 1873596, 15852655)
    assert DiskStat.parse(" ".join(STAT_LINE.split()[:11])) == s  # the 11-field line of kernels before 4.18
    with pytest.raises(ValueError):
        DiskStat.parse("1 2 3")


def test_figures_follow_the_formulas_of_stat_rst() -> None:
    # 600 reads of 16 sectors (8 KiB) in 2 s, 1,200 ms of summed read waits, 1,500 ms with anything in flight
    f = figures(DiskStat(reads=600, sectors_read=9600, read_ms=1200, io_ticks_ms=1500, time_in_queue_ms=1300), 2.0)
    assert f[diskstat.IOPS] == 300.0
    assert f[diskstat.MIB_S] == pytest.approx(600 * 8192 / 2**20 / 2)
    assert f[diskstat.KIB_PER_READ] == 8.0
    assert f[diskstat.LATENCY_MS] == 2.0
    assert f[diskstat.IN_FLIGHT] == pytest.approx(0.6)  # Little: 300 IOPS x 2 ms
    assert f[diskstat.BUSY] == 0.75
    assert diskstat.LATENCY_MS not in figures(DiskStat(0, 0, 0, 0, 0), 1.0)  # no read, no latency
    assert figures(DiskStat(1, 1, 1, 1, 1), 0.0) == {}


def test_a_window_sums_the_scans_of_a_probe_and_a_failed_reading_gives_none(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    clock = iter([0.0, 1.0, 5.0, 6.0]).__next__
    w = DiskWindow(DiskReader(("loop9",), (stat,)), clock=clock)
    for reads in (100, 400, 1000, 1300):  # two scans of 300 reads each, a cache drop in between
        stat.write_text(f"{reads} 0 {reads * 16} {reads} 0 0 0 0 0 {reads} {reads}\n")
        (w.start if reads in (100, 1000) else w.stop)()
    assert w.metrics()[diskstat.READS] == 600 and w.metrics()[diskstat.WINDOW_S] == 2.0
    gone = DiskWindow(DiskReader(("loop9",), (tmp_path / "absent",)))
    gone.start()
    gone.stop()
    assert gone.metrics() == {} and DiskWindow(None).metrics() == {}


def test_devices_beside_each_other_add_their_counts_and_keep_the_busier_one_s_busy_time(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("100 0 1600 50 0 0 0 0 0 400 60\n")
    b.write_text("300 0 4800 90 0 0 0 0 0 700 95\n")
    assert DiskReader(("vda", "loop5"), (a, b)).read() == DiskStat(400, 6400, 140, 700, 155)
    assert DiskReader(("vda", "loop5"), (a, b)).name == "vda+loop5"
    assert DiskReader(("vda", "loop5"), (a, tmp_path / "gone")).read() is None


def test_the_data_directory_s_own_device_is_read_and_a_remote_one_is_said_absent(tmp_path: Path) -> None:
    reader, note = data_disk(tmp_path)
    st = os.stat(tmp_path).st_dev
    if os.major(st) == 0:
        assert reader is None and "without a block device" in note
    else:
        assert reader is not None and reader.read() is not None
        assert reader.stat_paths == (Path(f"/sys/dev/block/{os.major(st)}:{os.minor(st)}/stat"),)
        # a tablespace on the same device is that device, read once
        assert data_disk(tmp_path, [str(tmp_path), ""])[0] == reader
    reader, note = data_disk(None)
    assert reader is None and note.startswith("no device reading: tuner does not run on the server's host")


# ---- the regime ---------------------------------------------------------------------------------------------

def _probe(eic: int, iops: float, latency_ms: float, *, kib: float = 8.0, busy: float | None = None,
           arm: str | None = None, family: str = "concurrency") -> Trial:
    in_flight = iops * latency_ms / 1000
    metrics = {diskstat.READS: iops * 1.4, diskstat.IOPS: iops, diskstat.MIB_S: iops * kib / 1024,
               diskstat.KIB_PER_READ: kib, diskstat.LATENCY_MS: latency_ms, diskstat.IN_FLIGHT: in_flight,
               diskstat.BUSY: min(1.0, in_flight) if busy is None else busy, diskstat.WINDOW_S: 1.4}
    return Trial(config={"effective_io_concurrency": eic}, value=1000.0, status="ok",
                 phase="confirm" if arm else "search", arm=arm, started_at=T0, duration_s=2.0, metrics=metrics,
                 family=family)


# iops=300 on the sandbox: 297-301 IOPS at every eic, 0.1-0.2 ms per read (throttled before the loop's queue)
IOPS_300 = [_probe(e, r, lat) for e, r, lat in
            ((1, 299.0, 0.2), (2, 297.5, 0.1), (0, 298.4, 0.15), (64, 300.6, 0.12), (1000, 296.0, 0.2))]


def test_reads_pinned_at_the_profile_s_iops_cap_are_iops_bound_and_say_no_setting_raises_it() -> None:
    [r] = assess(IOPS_300, profile=parse_profile("iops=300"), device="loop3")
    assert (r.regime, r.cap_iops, r.cap_source, r.device, r.probes) == ("iops", 300.0, "profile", "loop3", 5)
    assert "at the device's cap of 300 IOPS" in r.sentence and "no setting raises that" in r.sentence
    assert r.read_iops == pytest.approx(298.4)


# iops=3000 at scale 10, today's eic 1 (the confirmation's baseline arm), as measured: the windows hold planning
# and bitmap building too, so per-probe rates spread 2,209-3,336 under the cap
IOPS_3000_TODAY = [_probe(1, r, lat, arm="baseline") for r, lat in
                   ((2542.3, 0.16), (2647.8, 0.18), (3336.2, 0.10), (2209.4, 0.25), (2276.4, 0.16), (2311.9, 0.23))]


def test_a_cap_is_judged_on_the_upper_quartile_of_today_s_probes() -> None:
    [r] = assess(IOPS_3000_TODAY, profile=parse_profile("iops=3000"))
    assert r.regime == "iops" and r.cap_iops == 3000 and r.read_iops == pytest.approx(2427.1, abs=0.1)
    assert "reads ran at 2,427 IOPS" in r.sentence and "cap of 3,000 IOPS" in r.sentence
    # the same rates on a disk capped at 4,000 are not at its cap
    assert assess(IOPS_3000_TODAY, profile=parse_profile("iops=4000"))[0].regime != "iops"


def test_readahead_s_large_requests_at_the_profile_s_throughput_cap_are_throughput_bound() -> None:
    # mbps=125 at scale 10, today's eic 1, as measured: ~1 MiB readahead requests at 138-150 MiB/s (blk-throttle
    # lets a slice's budget through at once), far more bytes than the scan's pages
    points = [_probe(1, r, lat, kib=kib, busy=0.07, arm="baseline") for r, lat, kib in
              ((137.8, 1.81, 1064.8), (149.7, 2.51, 1023.3), (134.2, 1.92, 1073.4), (133.3, 1.72, 1073.4))]
    [r] = assess(points, profile=parse_profile("mbps=125"))
    assert r.regime == "throughput" and r.cap_mib_s == 125 and "cap of 125 MiB/s" in r.sentence
    assert "reading fewer bytes would" in r.sentence


def test_the_same_reads_without_a_profile_are_not_called_a_cap() -> None:
    # The throttle is above the loop device, so its counters show an idle device: nothing says "cap" there.
    [r] = assess(IOPS_300)
    assert r.regime == "cpu" and r.cap_iops is None


def test_reads_at_the_profile_s_throughput_cap_are_throughput_bound() -> None:
    points = [_probe(e, 125 * 1024 / kib * 0.97, 0.3, kib=kib) for e, kib in ((0, 64.0), (1, 8.0), (128, 16.0))]
    [r] = assess(points, profile=parse_profile("mbps=125"))
    assert r.regime == "throughput" and r.cap_mib_s == 125.0 and "125 MiB/s" in r.sentence


def test_below_a_known_cap_the_device_s_own_behaviour_decides() -> None:
    # latency=1ms,iops=3000 at eic 1: one read in flight, ~900 IOPS — far from the cap, waiting on each read
    [r] = assess([_probe(1, 880.0, 1.1, arm="baseline"), _probe(1, 910.0, 1.08, arm="baseline"),
                  _probe(128, 2700.0, 9.5)], profile=parse_profile("latency=1ms,iops=3000"))
    assert r.regime == "latency" and r.cap_iops is None


def test_a_latency_layer_with_room_for_more_reads_at_once_is_latency_bound() -> None:
    # latency=1ms: today's eic 1 reads one page at a time; deeper prefetch reaches ~25x the rate
    points = [_probe(1, 905.0, 1.09, arm="baseline"), _probe(1, 890.0, 1.1, arm="baseline"),
              _probe(0, 2400.0, 1.2), _probe(128, 22000.0, 1.6, arm="candidate"), _probe(512, 23500.0, 1.7)]
    [r] = assess(points, profile=parse_profile("latency=1ms"))
    assert r.regime == "latency" and r.read_iops == pytest.approx(897.5)
    assert "with room for more concurrency" in r.sentence and "ran at 22,000 IOPS (median)" in r.sentence
    [capped] = assess(points, profile=parse_profile("latency=1ms,iops=20000"))
    assert capped.regime == "latency" and capped.sentence.endswith("up to the device's cap of 20,000 (profile "
                                                                   "latency=1ms,iops=20000)")


def test_a_rate_flat_while_reads_in_flight_grow_is_a_cap_inferred_on_a_real_volume() -> None:
    # a gp3-like volume: ~3,000 IOPS whatever the depth, so each read waits longer as more are in flight
    points = [_probe(e, iops, lat) for e, iops, lat in
              ((0, 2950.0, 0.6), (1, 2990.0, 1.0), (4, 3010.0, 2.1), (16, 2970.0, 4.8), (64, 3000.0, 9.9))]
    [r] = assess(points)
    assert r.regime == "iops" and r.cap_source == "inferred"
    assert r.cap_iops == pytest.approx(3000, rel=0.02) and "ceiling is about 3,00" in r.sentence


def test_a_bandwidth_flat_while_request_sizes_differ_is_throughput_bound() -> None:
    points = [_probe(e, 125 * 1024 / kib, lat, kib=kib) for e, kib, lat in
              ((0, 128.0, 2.0), (1, 8.0, 0.9), (16, 16.0, 2.5), (128, 32.0, 6.0), (512, 64.0, 9.0))]
    [r] = assess(points)
    assert r.regime == "throughput" and r.cap_mib_s == pytest.approx(125, rel=0.02)


def test_a_device_idle_most_of_the_time_is_cpu_bound() -> None:
    points = [_probe(e, 9000.0 + e, 0.05, busy=0.3) for e in (0, 1, 16, 256)]
    [r] = assess(points)
    assert r.regime == "cpu" and "only 30% of the time" in r.sentence


def test_an_idle_device_that_deeper_probes_outran_is_not_cpu_bound() -> None:
    # mbps=125 under a load average of 19, as measured: eic 1 one read at a time, the device busy 22-67 % of the
    # time; eic 64 read at 7,700-15,900 IOPS — each synchronous read's wait was the limit, not the CPU
    today = [_probe(1, r, lat, busy=b, arm="baseline") for r, lat, b in
             ((3314.8, 0.08, 0.24), (3931.4, 0.12, 0.40), (1614.0, 0.15, 0.22), (1947.2, 0.18, 0.32),
              (1742.4, 0.39, 0.67), (1819.6, 0.12, 0.22))]
    deeper = [_probe(64, r, lat, busy=b, arm="candidate") for r, lat, b in
              ((13974.1, 1.03, 0.49), (7717.9, 2.01, 0.57), (15905.1, 1.78, 0.73))]
    [r] = assess(today + deeper, profile=parse_profile("mbps=125"))
    assert r.regime == "latency" and "ran at 10,846 IOPS (median)" in r.sentence
    assert assess(today, profile=parse_profile("mbps=125"))[0].regime == "cpu"  # without them: nothing outran it
    # where the deeper probes' median reaches a profile's throughput cap, the line says so
    [capped] = assess(today + deeper, profile=parse_profile("mbps=100"))
    assert capped.sentence.endswith("85 MiB/s: up to the device's cap of 100 MiB/s (profile mbps=100)")


def test_few_probes_do_not_make_a_cap() -> None:
    points = [_probe(e, 3000.0, lat) for e, lat in ((1, 1.0), (64, 10.0))]
    assert classify("concurrency", points).regime == "latency"


def test_busy_reads_with_no_deeper_probe_do_not_promise_room_for_more_concurrency() -> None:
    # hdd, a warm session (devices benchmark, 2026-12-06): every probe near today's eic, one read at a time, the
    # spindle busy — nothing measured says more reads at once would help, so the line does not say they would
    points = [_probe(e, r, lat, busy=0.99) for e, r, lat in ((1, 203.0, 4.95), (0, 201.0, 4.98), (1, 204.0, 4.9),
                                                            (0, 199.0, 5.0), (1, 202.0, 4.96))]
    [r] = assess(points)
    assert r.regime == "latency" and "room for more concurrency" not in r.sentence
    assert "no probe had 2x as many reads in flight, so whether more at once would raise the rate was not measured" \
        in r.sentence
    # deeper probes that were not faster, with rates too uneven to call a cap: said as measured
    uneven = points + [_probe(64, r, lat, busy=0.99) for r, lat in ((150.0, 40.0), (260.0, 30.0))]
    [u] = assess(uneven)
    assert u.regime == "latency" and "room for more concurrency" not in u.sentence
    assert "not faster: more reads at once did not raise the rate here" in u.sentence


def test_a_spindle_slowed_unevenly_by_a_loaded_machine_is_said_as_measured() -> None:
    # hdd beside other sandbox sessions (issue 59): 163 IOPS at 6.11 ms per read one at a time, the deeper probes
    # slower still (140 IOPS median) — rates too uneven to call a cap, and nothing says more reads at once help
    today = [_probe(1, r, lat, busy=0.97, arm="baseline") for r, lat in ((163.0, 6.11), (158.0, 6.3), (166.0, 6.0))]
    deeper = [_probe(e, r, lat, busy=0.99) for e, r, lat in
              ((16, 140.0, 110.0), (64, 131.0, 480.0), (256, 152.0, 900.0), (4, 185.0, 21.0))]
    [r] = assess(today + deeper)
    assert r.regime == "latency" and r.read_iops == 163 and r.peak_read_iops <= 300, r
    assert "room for more concurrency" not in r.sentence
    assert "ran at 146 IOPS (median), not faster: more reads at once did not raise the rate here" in r.sentence


def test_each_workload_gets_its_own_line_and_probes_without_reads_are_left_out() -> None:
    cached = _probe(1, 10.0, 0.1).model_copy(update={"metrics": {diskstat.READS: 3.0, diskstat.IOPS: 2.0}})
    out = assess([*IOPS_300, cached, *[_probe(ra, 300.0, 0.1, family="readahead", kib=128.0) for ra in (0, 1)]],
                 profile=parse_profile("iops=300"))
    assert [(r.family, r.probes) for r in out] == [("concurrency", 5), ("readahead", 2)]
    assert assess([]) == [] and assess(IOPS_300, absent="no device reading: x")[0].regime == "unmeasured"


# ---- carried by the report ----------------------------------------------------------------------------------

def _report(trials: list[Trial], **kw: object) -> Report:
    return Report(target=TargetOut(server_version_num=150014, server_version="15.14", in_recovery=True,
                                   system_identifier="7", mode="hot_standby", dsn="sandbox (removed)", sandbox=True),
                  session=SessionOut(id="abc", started_at=T0, duration_s=1.0, probes=len(trials), policy="default",
                                     seed=1, cache="cold", host="h", kernel="6.18"),
                  families=[FamilyOutcome(family="concurrency", status="done", reason="ok")], recommendations=[],
                  trials=trials, **kw)  # type: ignore[arg-type]


def test_the_report_carries_the_profile_and_the_regime_and_reads_them_back() -> None:
    regime = assess(IOPS_300, profile=parse_profile("iops=300"), device="loop3")
    report = _report(IOPS_300, device_profile="iops=300", io_regime=regime)
    again = parse(__import__("json").dumps(to_dict(report)))
    assert again.io_regime == regime and again.device_profile == "iops=300"
    text = " ".join(TableReport().render(report)["report.txt"].split())  # the terminal may wrap the line
    assert "device profile: iops=300" in text and "I/O regime (concurrency): reads ran at 298 IOPS" in text


def test_a_report_without_the_fields_still_loads() -> None:
    doc = to_dict(_report(IOPS_300))
    for key in ("io_regime", "device_profile"):
        doc.pop(key)
    assert parse(__import__("json").dumps(doc)).io_regime == []


@pytest.mark.parametrize("bad", [
    {"device_profile": "iops=lots"},
    {"io_regime": [IoRegimeOut(family="concurrency", regime="iops", sentence="x", device="loop3\nRUN")]},
    {"io_regime": [IoRegimeOut(family="concurrency", regime="iops", sentence="x", read_iops=float("nan"))]},
    {"io_regime": [IoRegimeOut(family="concurrency", regime="iops", sentence="x", cap_iops=-3.0)]},
])
def test_report_check_refuses_a_regime_tuner_never_writes(bad: dict[str, object]) -> None:
    with pytest.raises(ReportError):
        check(_report([], **bad))


def test_the_html_panel_draws_each_probe_against_the_cap() -> None:
    regime = assess(IOPS_300, profile=parse_profile("iops=300"), device="loop3")
    page = to_html(_report(IOPS_300, device_profile="iops=300", io_regime=regime))
    assert 'id="io-regime"' in page and 'data-figure="io-regime"' in page
    assert page.count('class="io-probe"') == len(IOPS_300)
    assert "cap 300 IOPS (profile)" in page and "<code>iops=300</code>" in page
    assert 'id="io-regime"' not in to_html(_report(IOPS_300))  # an older report: no panel


def test_under_a_throughput_cap_the_panel_draws_mib_s_against_the_cap() -> None:
    points = [_probe(e, 125 * 1024 / kib * 0.97, 0.3, kib=kib) for e, kib in ((0, 64.0), (1, 8.0), (128, 16.0))]
    regime = assess(points, profile=parse_profile("mbps=125"))
    page = to_html(_report(points, device_profile="mbps=125", io_regime=regime))
    assert "cap 125 MiB/s (profile)" in page and "read MiB/s" in page


def test_chromium_parses_the_panel_into_one_figure_with_every_probe(tmp_path: Path) -> None:
    # The consumer of report.html is a browser: headless Chromium's DOM must hold the figure and every marker.
    regime = assess(IOPS_300, profile=parse_profile("iops=300"), device="loop3")
    page = tmp_path / "report.html"
    page.write_text(to_html(_report(IOPS_300, device_profile="iops=300", io_regime=regime)))
    dom = subprocess.run([shutil.which("chromium") or "chromium", "--headless", "--no-sandbox", "--disable-gpu",
                          "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120).stdout
    [fig] = re.findall(r'<svg[^>]*data-figure="io-regime".*?</svg>', dom, flags=re.S)
    assert fig.count('class="io-probe"') == len(IOPS_300) and "cap 300 IOPS (profile)" in fig


# The hostile-input suite's registry (tests/unit/hostile.py): issue 59 item 9's input, counted once — a spindle's
# readings on a loaded machine, uneven enough that no cap can honestly be named.
INPUTS = [Input("regime-loaded-spindle", "probe readings",
                "hdd beside other sessions: 163 IOPS at 6.11 ms one at a time; deeper probes 131-185 IOPS",
                frozenset({"59.9"}))]


def test_a_value_kept_without_a_confirmation_is_described_by_its_own_probes() -> None:
    # A session that kept today's eic 1 on a measured plateau ran no baseline arm: today's figures come from its
    # probes at eic 1, not from the deeper ones (8.8 reads in flight at 43 ms each on hdd in a clean clone's CI).
    at_one = [_probe(1, 200.0, 5.0, busy=0.97) for _ in range(3)]
    deeper = [_probe(e, 205.0, 40.0, busy=0.99) for e in (16, 64, 256)]
    [r] = assess(at_one + deeper, today={"effective_io_concurrency": 1})
    assert r.reads_in_flight is not None and r.reads_in_flight <= 1.5, r
    [mixed] = assess(at_one + deeper)
    assert mixed.reads_in_flight is not None and mixed.reads_in_flight > 1.5, mixed


# ---- the binding limit on a volume with several (issue #54): gp3 = 800 us per read, 3,000 IOPS, 125 MiB/s ----------

@pytest.mark.parametrize(("iops", "mib_s", "bound"), [
    (950.0, 7.4, "latency"),        # one 8 KiB read at a time, ~1 ms each: a third of the IOPS cap
    (2_950.0, 23.0, "iops"),        # deep prefetch of 8 KiB reads: held at 3,000
    (124.0, 124.0, "throughput"),   # 1 MiB readahead requests: held at 125 MiB/s, 4 % of the IOPS cap
    (2_500.0, 120.0, "throughput"), # both above 80 %: the one more used
])
def test_the_binding_limit_is_the_cap_the_reads_ran_at_else_the_latency(iops: float, mib_s: float, bound: str) -> None:
    from tuner.core.regime import binding

    assert binding(parse_profile("gp3"), iops, mib_s) == bound


def test_a_volume_without_a_limit_of_its_own_has_no_binding_limit() -> None:
    from tuner.core.regime import binding

    assert binding(None, 100.0, 1.0) is None
    assert binding(parse_profile("local"), 100.0, 1.0) is None and binding(parse_profile("ram"), 100.0, 1.0) is None
    assert binding(parse_profile("iops=300"), 100.0, 1.0) is None  # a cap not reached, no latency: nothing named
    assert binding(parse_profile("hdd"), 150.0, 1.2) == "latency"  # the spindle's seek


def test_on_gp3_one_read_at_a_time_the_line_names_the_latency_not_the_cap() -> None:
    # eic 1 at ~1 ms a read, ~950 IOPS; deeper probes reach the 3,000 cap.
    probes = [_probe(1, 950.0, 1.0), _probe(1, 930.0, 1.05), _probe(64, 2_980.0, 1.1), _probe(128, 2_990.0, 1.1),
              _probe(1000, 2_960.0, 1.2)]
    r = classify("concurrency", probes, profile=parse_profile("gp3"), today={"effective_io_concurrency": 1})
    assert r.regime == "latency" and r.binding == "latency", r
    assert "of gp3's limits (0.8 ms per read, 3,000 IOPS, 125 MiB/s), the latency binds" in r.sentence
    assert "32% of the IOPS cap" in r.sentence and "profile gp3 = latency=800us,iops=3000,mbps=125" in r.sentence
    at_cap = classify("concurrency", probes, profile=parse_profile("gp3"), today={"effective_io_concurrency": 64})
    assert at_cap.regime == "iops" and at_cap.binding == "iops", at_cap
    assert "the IOPS cap binds (the reads used 19% of the throughput cap)" in at_cap.sentence


def test_a_single_limit_volume_keeps_its_line_without_the_clause() -> None:
    r = classify("concurrency", IOPS_300, profile=parse_profile("iops=300"))
    assert r.binding == "iops" and "limits (" not in r.sentence
    mixed = classify("concurrency", IOPS_300, profile=parse_profile("latency=1ms,iops=300"))
    assert "of the volume's limits (1 ms per read, 300 IOPS), the IOPS cap binds" in mixed.sentence
