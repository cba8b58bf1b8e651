"""The pure parts of benchmarks/wal_truth.py: the grid, the nearest cell, the peers' rules and the scoring."""

from __future__ import annotations

import random

import pytest

from benchmarks import wal_truth as w

TODAY = {"commit_delay": 0, "commit_siblings": 5, "wal_writer_delay": 200, "wal_writer_flush_after": 128,
         "wal_compression": "off", "wal_buffers": -1}


def test_the_grid_is_every_delay_sibling_pair_and_each_other_setting_one_at_a_time() -> None:
    cells = w.grid(TODAY)
    labels = [w.label(c, TODAY) for c in cells]
    assert labels[0] == "today" and len(labels) == len(set(labels)) == 1 + 3 * 3 + 2 + 2 + 2 + 2
    pairs = {(c["commit_delay"], c["commit_siblings"]) for c in cells}
    assert {(d, s) for d in w.DELAYS for s in w.SIBLINGS} <= pairs
    assert (0, 1) not in pairs and (0, 20) not in pairs  # commit_delay 0 ignores commit_siblings: measured once
    # every other cell changes one setting of today's, and only one
    for c in cells[10:]:
        assert sum(c[k] != TODAY[k] for k in TODAY) == 1, c
    # only the compressions the build offers
    assert "wal_compression=lz4" not in [w.label(c, TODAY) for c in w.grid(TODAY, offered=("off", "pglz"))]
    assert [w.label(c, TODAY) for c in w.grid(TODAY, quick=True)] == ["today", "commit_delay=1000"]


def test_the_grid_fits_the_readmes_estimate() -> None:
    # 18 cells x 8 loads x 5-20 repeats x (2.5 s + 1.2 s overhead) = 44 min to 3.0 h: what the README names
    assert w.estimate_s(len(w.grid(TODAY)), len(w.LOADS), probe_s=2.5, repeats=5) == pytest.approx(44.4 * 60)
    assert w.estimate_s(len(w.grid(TODAY)), len(w.LOADS), probe_s=2.5, repeats=20) == pytest.approx(2.96 * 3600)


def test_an_off_grid_answer_is_scored_at_its_nearest_cell() -> None:
    cells = w.grid(TODAY)
    assert w.label(w.nearest_cell({**TODAY, "commit_delay": 900}, cells), TODAY) == "commit_delay=1000"
    assert w.label(w.nearest_cell({**TODAY, "commit_delay": 4000, "commit_siblings": 2}, cells), TODAY) == \
        "commit_delay=5000,commit_siblings=1"
    assert w.label(w.nearest_cell({**TODAY, "commit_delay": 3}, cells), TODAY) == "today"
    assert w.label(w.nearest_cell({**TODAY, "wal_compression": "pglz"}, cells), TODAY) == "wal_compression=pglz"
    assert w.label(w.nearest_cell(dict(TODAY), cells), TODAY) == "today"


def test_pgtunes_wal_buffers_rule() -> None:
    assert w.pgtune_wal_buffers(128 * 1024) == 3932  # 3 % of 128 MB
    assert w.pgtune_wal_buffers(480 * 1024) == 16 * 1024  # 14.4 MB: rounded up to 16 MB
    assert w.pgtune_wal_buffers(8 * 1024 * 1024) == 16 * 1024  # capped
    assert w.pgtune_wal_buffers(512) == 32  # the floor
    p = w.peers(TODAY, 128 * 1024, 15)
    assert p["postgresql_default"] == TODAY and p["pgtune"]["wal_buffers"] == 491 and p["pgtune"]["wal_compression"] == "lz4"
    assert w.peers(TODAY, 128 * 1024, 14)["pgtune"]["wal_compression"] == "on"
    assert p["folklore_commit_delay_1000"] == {**TODAY, "commit_delay": 1000}


def test_a_sessions_answer_is_what_it_tells_the_operator_to_run() -> None:
    recs = [{"knob": "commit_delay", "decision": "change", "current": 0, "recommended": 812.0},
            {"knob": "wal_writer_delay", "decision": "keep", "current": 200, "recommended": 37},
            {"knob": "wal_compression", "decision": "change", "current": "off", "recommended": "lz4"}]
    assert w.session_answer(recs, TODAY) == {**TODAY, "commit_delay": 812, "wal_compression": "lz4"}


def _samples(means: dict[str, float], loads: list[str], n: int = 8, cv: float = 0.01) -> dict[str, list[float]]:
    rng = random.Random(5)
    return {f"{ld}|{lab}": [m * (1 + rng.gauss(0, cv)) for _ in range(n)] for ld in loads for lab, m in means.items()}


def test_scoring_finds_the_truth_per_load_and_each_answers_regret_and_verdict() -> None:
    cells = w.grid(TODAY, quick=True)
    # at 1 client commit_delay only adds its wait; at 16, grouping makes it 30 % faster
    s = _samples({"today": 5.0, "commit_delay=1000": 6.0}, ["10x1"])
    s.update(_samples({"today": 1.3, "commit_delay=1000": 1.0}, ["10x16"]))
    answers = {"default": dict(TODAY), "folklore": {**TODAY, "commit_delay": 1000}, "tuner": {**TODAY, "commit_delay": 700}}
    out = w.score_answers(s, 1.05, cells, TODAY, answers)
    one, many = out["per_load"]["10x1"], out["per_load"]["10x16"]
    assert one["best"] == "today" and many["best"] == "commit_delay=1000"
    assert many["gain_over_today"] == pytest.approx(0.3, abs=0.03) and many["best_tps"] == pytest.approx(1000, rel=0.03)
    assert one["answers"]["default"]["verdict"] == "hit" and many["answers"]["default"]["verdict"] == "miss"
    assert many["answers"]["tuner"]["cell"] == "commit_delay=1000" and many["answers"]["tuner"]["verdict"] == "hit"
    assert one["answers"]["folklore"]["regret"] == pytest.approx(0.2, abs=0.02)
    assert out["overall"]["folklore"] == {"cell": "commit_delay=1000", "worst_regret": one["answers"]["folklore"]["regret"],
                                          "hits": 1, "loads": 2}
    md = w.table({"local": {**out}})
    assert "| truth 10x16: best cell, its TPS | commit_delay=1000:" in md and "| folklore | commit_delay=1000: worst" in md


def test_two_cells_the_noise_cannot_tell_apart_leave_the_verdict_unresolved() -> None:
    cells = w.grid(TODAY, quick=True)
    s = _samples({"today": 1.0, "commit_delay=1000": 1.05}, ["10x4"], n=4, cv=0.05)
    out = w.score_answers(s, 1.05, cells, TODAY, {"folklore": {**TODAY, "commit_delay": 1000}})
    assert out["per_load"]["10x4"]["answers"]["folklore"]["verdict"] == "unresolved"


def test_loads_are_read_as_rows_by_clients_and_bad_ones_refused_in_one_sentence() -> None:
    import argparse

    assert w.parse_loads("10x1, 10x8,1000x16") == ((10, 1), (10, 8), (1000, 16))
    for bad, says in (("10x0", "at least 1 row"), ("ten", "ROWSxCLIENTS"), ("", "at least 1 row")):
        with pytest.raises(argparse.ArgumentTypeError, match=says):
            w.parse_loads(bad)


def test_the_answers_sweep_measures_each_answer_as_given_beside_today_and_each_loads_best() -> None:
    cells = w.grid(TODAY)
    grid_samples = _samples({"today": 1.3, "commit_delay=1000,commit_siblings=1": 1.0}, ["10x16"])
    grid_samples.update(_samples({"today": 5.0, "commit_delay=1000,commit_siblings=1": 5.0}, ["10x1"]))
    recs = [{"knob": "commit_delay", "decision": "change", "current": 0, "recommended": 256},
            {"knob": "commit_siblings", "decision": "change", "current": 5, "recommended": 1}]
    measured = {"truth_sweep": {"today": TODAY, "cells": cells, "samples": grid_samples, "min_effect": 1.05,
                                "shared_buffers_kb": 128 * 1024, "major": 15, "wall_s": 1, "load": [0, 0],
                                "probe_wall_s": 3, "standby": "detached"},
                "profile": "flush=2ms", "sessions": [{"seed": 4600, "recommendations": recs}]}
    labels = [w.label(c, TODAY) for c in w.answer_cells(measured)]
    # today's first, the best cell once (best at both loads), the answer as given (not its nearest cell, 100 µs)
    assert labels == ["today", "commit_delay=1000,commit_siblings=1", "commit_delay=256,commit_siblings=1",
                      "wal_compression=lz4,wal_buffers=491", "commit_delay=1000"]
    # the grid scores 256 µs at its nearest cell; the answers' sweep at what it measured for 256 itself
    assert w.score_profile(measured)["overall"]["tuner 4600"]["cell"] == "commit_delay=100,commit_siblings=1"
    same = _samples({"today": 1.3, "commit_delay=1000,commit_siblings=1": 1.0, "commit_delay=256,commit_siblings=1": 1.02,
                     "wal_compression=lz4,wal_buffers=491": 1.3, "commit_delay=1000": 1.4}, ["10x16"])
    measured["answer_sweep"] = {"samples": same, "cells": w.answer_cells(measured), "wall_s": 1, "load": [0, 0]}
    scored = w.score_profile(measured)
    mine = scored["same_sweep"]["per_load"]["10x16"]["answers"]["tuner 4600"]
    assert mine["cell"] == "commit_delay=256,commit_siblings=1" and mine["verdict"] == "hit"
    md = w.table({"flush=2ms": scored})
    assert "| tuner 4600 (as given) | commit_delay=256,commit_siblings=1: worst" in md
