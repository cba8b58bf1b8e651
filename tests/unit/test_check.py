"""`tuner check`'s pure parts and its command line: the estimate from the policy's budgets and measured probe times,
the privileges a role lacks with their GRANTs, the table's width, the help's width, and bad input (exit 2)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tuner.cli.cmd_check import render
from tuner.settings.policy import load_policy
from tuner.session.check import estimate
from tuner.report.preflight import Check, ColdStart, FamilyPlan, Grant, Preflight
from tuner.target.privileges import missing

REPO = Path(__file__).resolve().parents[2]
EVERY = ("read_all_settings", "control_system", "read_tables", "set_track_io_timing")
WRITABLE = ("file_settings", "show_file_settings", "stat_file", "read_file", "read_server_files")


def run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    own = {"TUNER_TUNER__STATE_DIR": os.environ["TUNER_TUNER__STATE_DIR"]} if "TUNER_TUNER__STATE_DIR" in os.environ else {}
    return subprocess.run([sys.executable, "-m", "tuner", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), **own, **(env or {})})


def test_the_estimate_is_the_policys_budgets_per_family_that_runs_times_its_measured_probe() -> None:
    policy = load_policy("default")
    b = policy.budget
    plans = [FamilyPlan(family="a", runs=True, reason="", probe_s=2.0),
             FamilyPlan(family="b", runs=False, reason="skipped", probe_s=100.0),
             FamilyPlan(family="c", runs=True, reason="", probe_s=0.5)]
    e = estimate(policy, None, plans)
    assert e is not None
    low, high = b.min_probes + 2 * b.confirm_min_pairs, b.probes + 2 * b.confirm_max_pairs
    assert (e.probes_low, e.probes_high) == (2 * low, 2 * high)  # the skipped family counts for nothing
    assert e.duration_low_s == pytest.approx(low * 2.5) and e.duration_high_s == pytest.approx(high * 2.5)
    assert "read-only run" in e.how and e.restarts_high == e.drops_high == 0  # nothing cold to count


def test_each_cold_probe_counts_its_restart_and_drop_and_their_time_on_the_target() -> None:
    # Issue #58 item 3: 0.49-1.2 s estimated for a session of 18 s with 21 restarts: the restarts were not counted.
    policy = load_policy("default")
    b = policy.budget
    plans = [FamilyPlan(family="scan", runs=True, reason="", probe_s=0.01),
             FamilyPlan(family="load", runs=True, reason="", probe_s=2.0, cold=False)]
    low, high = 3 + 2 * b.confirm_min_pairs, 3 + 2 * b.confirm_max_pairs
    untimed = estimate(policy, 3, plans, ColdStart(restart=True, drop=True))
    assert untimed is not None and (untimed.restarts_low, untimed.restarts_high) == (low, high)
    assert (untimed.drops_low, untimed.drops_high) == (low, high)  # the generated load is not made cold
    assert "--time-restart" in untimed.how and "lower bound" in untimed.how
    timed = estimate(policy, 3, plans, ColdStart(restart=True, drop=True, seconds=0.8))
    assert timed is not None and timed.cold_start_s == 0.8
    assert timed.duration_low_s == pytest.approx(low * (0.01 + 0.8) + low * 2.0)
    assert timed.duration_high_s == pytest.approx(high * (0.01 + 0.8) + high * 2.0)
    assert timed.duration_low_s < (timed.duration_s or 0) < timed.duration_high_s
    text = render(Preflight(target="t", server_version="15", mode="hot_standby", checks=[], families=plans,
                            missing=[], estimate=timed), width=80)
    assert f"{low}-{high} restarts, {low}-{high} page-cache drops, a restart + drop timed at 0.8 s" in \
        " ".join(text.split())


def test_budget_caps_the_search_and_an_untimed_family_takes_the_slowest_measured_time() -> None:
    policy = load_policy("default")
    b = policy.budget
    plans = [FamilyPlan(family="a", runs=True, reason="", probe_s=3.0), FamilyPlan(family="b", runs=True, reason="")]
    e = estimate(policy, 3, plans)
    assert e is not None
    assert e.probes_low == 2 * (3 + 2 * b.confirm_min_pairs) and e.probes_high == 2 * (3 + 2 * b.confirm_max_pairs)
    assert e.duration_low_s == pytest.approx(2 * 3.0 * (3 + 2 * b.confirm_min_pairs))
    assert "--budget" in e.how


def test_a_probe_of_a_few_milliseconds_still_gives_a_duration_above_zero() -> None:
    # CI's quiet machine timed a small standby's warm probe at ~2 ms: 17 probes rounded to tenths gave 0.0 s.
    e = estimate(load_policy("default"), None, [FamilyPlan(family="a", runs=True, reason="", probe_s=0.002)])
    assert e is not None and e.duration_low_s is not None and 0 < e.duration_low_s <= e.duration_high_s


def test_no_time_measured_gives_probes_but_no_duration_and_nothing_running_gives_no_estimate() -> None:
    policy = load_policy("default")
    e = estimate(policy, None, [FamilyPlan(family="a", runs=True, reason="")])
    assert e is not None and e.duration_low_s is None and "no workload could be timed" in e.how
    assert estimate(policy, None, [FamilyPlan(family="a", runs=False, reason="x")]) is None


def test_a_superuser_lacks_nothing() -> None:
    row = {"role": "postgres", **{k: True for k in EVERY + WRITABLE}}
    assert missing(row, writable=True) == []


def test_a_bare_role_on_a_standby_is_told_only_what_a_standby_needs_with_its_quoted_name() -> None:
    row = {"role": '"Tuner Role"', **{k: False for k in EVERY + WRITABLE}}
    grants = missing(row, writable=False)
    assert [g.sql for g in grants] == [
        'GRANT pg_read_all_settings TO "Tuner Role";',
        'GRANT EXECUTE ON FUNCTION pg_control_system() TO "Tuner Role";',
        'GRANT pg_read_all_data TO "Tuner Role";',
        'GRANT SET ON PARAMETER track_io_timing TO "Tuner Role";',
    ]
    assert all(g.needed_for for g in grants)


def test_on_a_writable_clone_the_interlocks_reads_are_listed_too() -> None:
    row = {"role": "tuner", **{k: True for k in EVERY}, **{k: False for k in WRITABLE}}
    sql = [g.sql for g in missing(row, writable=True)]
    assert "GRANT SELECT ON pg_file_settings TO tuner;" in sql
    assert "GRANT EXECUTE ON FUNCTION pg_read_file(text, bigint, bigint, boolean) TO tuner;" in sql
    assert "GRANT pg_read_server_files TO tuner;" in sql and len(sql) == len(WRITABLE)
    assert missing(row, writable=False) == []


def _found(refused: bool) -> Preflight:
    long = "x" * 150 + " " + "word " * 40
    return Preflight(
        target="postgresql://tuner@/postgres?host=/var/tmp/" + "d" * 120 + "&port=5432", server_version="15.18",
        mode=None if refused else "hot_standby",
        checks=[Check(name="interlock", status="fail" if refused else "ok", detail=long, fix=long)],
        families=[FamilyPlan(family="f", runs=True, reason=long, workload=["SELECT " + long],
                             checks=[Check(name="/dev/loop2", status="ok", detail=long)], probe_s=0.01)],
        missing=[Grant(privilege="p", needed_for=long, sql="GRANT pg_read_all_settings TO tuner;")], estimate=None)


@pytest.mark.parametrize("width", [60, 80, 100, 200])
def test_the_table_fits_the_terminal_whatever_it_shows(width: int) -> None:
    text = render(_found(False), width=width)
    assert max(len(line) for line in text.splitlines()) <= width
    assert "Result: a session may run" in text and "GRANT pg_read_all_settings TO tuner;" in text


def test_a_refusal_says_the_session_would_stop() -> None:
    assert "refused by the interlock" in render(_found(True)) and _found(True).refused


@pytest.mark.parametrize("columns", ["40", "80", "200"])
def test_help_fits_80_columns_at_any_terminal_width_and_lists_the_exit_statuses(tmp_path: Path, columns: str) -> None:
    proc = run("check", "--help", cwd=tmp_path, env={"COLUMNS": columns})
    assert proc.returncode == 0, proc.stderr
    assert max(len(line) for line in proc.stdout.splitlines()) <= 80, proc.stdout
    for code in ("0  the session may run", "2  bad input", "3  refused by the safety interlock"):
        assert code in proc.stdout


def test_no_target_is_bad_input(tmp_path: Path) -> None:
    proc = run("check", cwd=tmp_path)
    assert proc.returncode == 2 and "no target" in proc.stderr and "Traceback" not in proc.stderr


def test_scale_without_a_sandbox_is_bad_input(tmp_path: Path) -> None:
    proc = run("check", "--dsn", "host=/nonexistent", "--scale", "1", cwd=tmp_path)
    assert proc.returncode == 2 and "--scale" in proc.stderr and "Traceback" not in proc.stderr


def test_an_unreachable_target_is_one_sentence_exit_1(tmp_path: Path) -> None:
    proc = run("check", "--dsn", "host=/nonexistent-socket-dir port=1", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "tuner: error: could not connect" in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stdout == ""


def _host_checks_with_a_journal(state: Path) -> list[Check]:
    from tuner.actuate import Journal
    from tuner.settings.config import Config
    from tuner.session.check import host_checks
    from tuner.target.facts import TargetFacts

    facts = TargetFacts(server_version_num=150018, server_version="15.18", in_recovery=True, database="d", user="u",
                        is_superuser=True, can_read_all_settings=True, data_directory="/nonexistent",
                        system_identifier="1", staging_marker=None, marker_source=None, server_addr=None,
                        settings={}, tablespaces=())
    return host_checks(Config(), load_policy("default"), facts, Journal(state), sandbox=True)


def test_a_live_sessions_journal_is_not_called_an_earlier_sessions_and_the_verdict_says_it_waits(
        tmp_path: Path) -> None:
    from tuner.actuate import Journal

    running = Journal(tmp_path)
    running.open("f00dfeed1234")  # another tuner's session, live: it holds the lock and has a journal
    (tmp_path / "journal.json").write_text("{}")
    try:
        checks = _host_checks_with_a_journal(tmp_path)
    finally:
        running.restore()
    [live] = [c for c in checks if c.name == "live session"]
    assert f"pid {os.getpid()}, session f00dfeed1234" in live.detail and "refused" in live.detail
    assert not any("earlier session" in c.detail or "tuner restore" in (c.fix or "") for c in checks)
    found = Preflight(target="t", server_version="15.18", mode="hot_standby", checks=checks, families=[], missing=[],
                      estimate=None)
    text = render(found, width=80)
    assert "a session may run." not in text and "live session ends" in text


def test_a_journal_nobody_holds_is_an_earlier_sessions_to_restore(tmp_path: Path) -> None:
    (tmp_path / "journal.lock").write_text("pid 1, session old\n")
    (tmp_path / "journal.json").write_text("{}")
    checks = _host_checks_with_a_journal(tmp_path)
    assert [c.fix for c in checks if c.name == "journal"] == ["tuner restore (puts them back now)"]
    assert not any(c.name == "live session" for c in checks)
