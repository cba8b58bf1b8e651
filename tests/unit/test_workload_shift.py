"""Issue #56 item 5: the drift check follows the workload — the top statements by read I/O compared as two
distributions of shares; a shift past the threshold is one change that re-probes, with its sentence."""

from __future__ import annotations

from typing import Any

from tuner.daemon import workload_shift
from tuner.daemon.drift import action, changes_json, compare
from tuner.daemon.watch import follows_statements
from tuner.daemon.workload_shift import SHIFT_THRESHOLD, carried, shift, top
from tuner.settings.config import Config

A = {"11": 0.4, "12": 0.25, "13": 0.15, "14": 0.1, "15": 0.05}


def _fp(statements: dict[str, float] | None, **extra: Any) -> dict[str, Any]:
    fp: dict[str, Any] = {"server": {"major": 16}, "settings": {}, "devices": None, **extra}
    if statements is not None:
        fp["statements"] = {"top": statements, "blocks_read": 1000}
    return fp


def test_the_same_top_is_no_shift_and_three_new_of_five_is_one_with_its_sentence() -> None:
    assert shift(A, A).distance == 0 and not shift(A, A).drifted
    b = {"11": 0.1, "12": 0.05, "21": 0.4, "22": 0.25, "23": 0.15}
    moved = shift(A, b)
    assert moved.new == 3 and moved.top == 5 and moved.drifted
    assert moved.distance == 0.8  # (0.3 + 0.2 + 0.15 + 0.1 + 0.05 + 0.4 + 0.25 + 0.15) / 2
    assert moved.sentence() == ("workload changed: 3 of the top 5 statements are new (the read I/O shares moved by "
                                "0.80, more than 0.3)")


def test_a_swap_of_neighbours_or_a_small_newcomer_stays_below_the_threshold() -> None:
    swapped = {"11": 0.25, "12": 0.4, "13": 0.15, "14": 0.1, "15": 0.05}
    assert shift(A, swapped).distance == 0.15 and not shift(A, swapped).drifted
    newcomer = {**{k: v for k, v in A.items() if k != "15"}, "99": 0.08}
    assert shift(A, newcomer).new == 1 and shift(A, newcomer).distance < SHIFT_THRESHOLD


def test_compare_reports_a_workload_change_only_when_both_fingerprints_have_statements() -> None:
    b = {"21": 0.5, "22": 0.3, "11": 0.1}
    [change] = compare(_fp(A), _fp(b))
    assert change.kind == "workload" and change.key == "workload:top"
    assert change.sentence().startswith("workload changed: 2 of the top 3 statements are new")
    assert changes_json([change])["workload:top"]["sentence"] == change.sentence()
    assert compare(_fp(A), _fp(A)) == []
    assert compare(_fp(None), _fp(b)) == [] and compare(_fp(A), _fp(None)) == []  # unreadable is not changed


def test_a_workload_change_re_probes_the_families_that_read_it_and_says_why() -> None:
    act = action(compare(_fp(A), _fp({"21": 0.9})), {})
    # the WAL and replay families run loads of their own: a new read workload does not move their answers
    assert act.kind == "reprobe" and act.families == ("concurrency", "readahead") and act.knobs == ()
    assert act.reason.startswith("Re-probe concurrency, readahead, as the statements that read the most")
    assert "the statements that read the most are not the ones the recommendations were measured on" in act.reason
    assert "workload changed: 1 of the top 1 statements is new" in act.reason


def test_a_workload_change_beside_a_drifted_wal_setting_re_validates_it_and_beside_a_kernel_re_probes_all() -> None:
    def wal_setting(value: int) -> dict[str, Any]:
        return {"settings": {"commit_delay": {"value": value, "source": "configuration file", "family": "wal",
                                              "sourcefile": "/etc/pg.conf", "sourceline": 3, "unit": "us"}}}

    before, after = {**_fp(A), **wal_setting(100)}, {**_fp({"21": 0.9}), **wal_setting(0)}
    act = action(compare(before, after), {"commit_delay": 100})
    assert (act.kind, act.families, act.knobs) == ("reprobe", ("concurrency", "readahead"), ("commit_delay",))
    assert "and re-validate commit_delay" in act.reason
    act = action(compare(_fp(A, kernel="6.1"), _fp({"21": 0.9}, kernel="6.12")), {})
    assert (act.kind, act.families) == ("reprobe", ())
    assert "a new kernel release" in act.reason and "the statements that read the most" in act.reason


def test_the_baseline_keeps_its_statements_until_they_drift() -> None:
    a_bit = {"11": 0.35, "12": 0.3, "13": 0.15, "14": 0.1, "16": 0.05}
    kept = carried(_fp(A), _fp(a_bit))
    assert top(kept) == A  # small steps add up against the workload last measured
    b = {"21": 0.9}
    assert top(carried(_fp(A), _fp(b))) == b
    assert carried(None, _fp(b)) == _fp(b) and top(carried(_fp(A), _fp(None))) is None


def test_top_reads_at_most_the_top_statements_and_nothing_from_a_fingerprint_without_them() -> None:
    many = {str(i): 0.01 * i for i in range(1, 11)}
    assert list(top(_fp(many)) or {}) == ["10", "9", "8", "7", "6"]
    assert top({"statements": None}) is None and top({}) is None


def test_only_a_target_whose_workload_comes_from_pg_stat_statements_follows_it() -> None:
    cfg = Config()
    assert not follows_statements(cfg)
    assert workload_shift.TOP_STATEMENTS == 5
