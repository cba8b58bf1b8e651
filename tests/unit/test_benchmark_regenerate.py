"""benchmarks/regenerate.py: its runs match the committed result files, and docs/results.md's summary block
has a row per run, equal to what the committed files give."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import regenerate  # noqa: E402
from optimiser import expand_surfaces  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"


KEPT_RUNS = [r for r in regenerate._runs() if r.name in regenerate.KEPT]


def test_the_committed_result_files_are_runs_and_only_they_escape_the_ignore_file() -> None:
    # A kept name that is no run would be a file nobody regenerates; one missing from .gitignore's exceptions
    # would not be committed, and a run not kept but excepted there would be committed by the next full run.
    assert len(KEPT_RUNS) == len(regenerate.KEPT) <= 10
    for run in KEPT_RUNS:
        assert (RESULTS / f"{run.name}.json").is_file(), run.name
    rules = (RESULTS / ".gitignore").read_text().split()
    assert "*" in rules
    assert {r[1:-len(".json")] for r in rules if r.startswith("!") and r.endswith(".json")} == set(regenerate.KEPT)


def test_the_runs_match_the_settings_recorded_in_each_file() -> None:
    for run in KEPT_RUNS:
        if run.script == "confidence":
            continue
        recorded = json.loads((RESULTS / f"{run.name}.json").read_text())
        args = list(run.args)
        assert recorded["seeds"] == run.seeds, run.name
        assert recorded["noise_cv"] == float(args[args.index("--noise-cv") + 1]), run.name
        if run.script == "adversary":
            assert recorded["policy"] == "default" and "--policy" not in args, run.name
            continue
        expected_range = args[args.index("--range") + 1] if "--range" in args else "grid"
        assert recorded.get("search_range", "grid") == expected_range, run.name
        expected_policy = args[args.index("--policy") + 1] if "--policy" in args else "default"
        assert recorded.get("policy", "default") == expected_policy, run.name
        if "--surface" in args:  # the surfaces the run reads now are the ones the file was measured on
            paths = expand_surfaces([str(ROOT / args[i + 1]) for i, a in enumerate(args) if a == "--surface"])
            assert [s["name"] for s in recorded["surfaces"]] == [p.stem for p in paths], run.name


def test_every_surface_pattern_names_files() -> None:
    for run in regenerate._runs():
        args = list(run.args)
        for i, a in enumerate(args):
            if a == "--surface":
                assert list(ROOT.glob(args[i + 1])), args[i + 1]


def test_list_prints_commands_relative_to_the_repository(capsys: pytest.CaptureFixture[str]) -> None:
    assert regenerate.main(["--list", "--only", "random-cv0.10"]) == 0
    out = capsys.readouterr().out
    assert "--json benchmarks/results/random-cv0.10.json" in out
    assert "--plot benchmarks/results/random-cv0.10.png" in out


def test_an_unknown_name_is_one_sentence_and_a_hint(capsys: pytest.CaptureFixture[str]) -> None:
    assert regenerate.main(["--only", "nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--list" in err


def test_first_difference_ignores_wall_times_and_names_the_path() -> None:
    old = {"duration_s": 100.0, "surfaces": [{"name": "flat", "methods": {"tuner": {"success_rate": 1.0}}}]}
    same = {"duration_s": 7.0, "surfaces": [{"name": "flat", "methods": {"tuner": {"success_rate": 1.0}}}]}
    moved = {"duration_s": 7.0, "surfaces": [{"name": "flat", "methods": {"tuner": {"success_rate": 0.9}}}]}
    assert regenerate.first_difference(old, same) is None
    assert regenerate.first_difference(old, moved) == ".surfaces[0].methods.tuner.success_rate: 1.0 -> 0.9"
    assert regenerate.first_difference(old, {"surfaces": []}) == ".surfaces (1 items, now 0)"
    assert "only in the new file" in (regenerate.first_difference({}, {"verdict": 1}) or "")


def test_compare_reports_each_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    committed = json.loads((RESULTS / "confidence.json").read_text())
    (tmp_path / "confidence.json").write_text(json.dumps({**committed, "duration_s": 1.0}))
    names = ("confidence", "random-cv0.10", "random-cv0.05")
    runs = [r for r in regenerate._runs() if r.name in names]
    assert regenerate.compare(runs, tmp_path) == 0
    out = capsys.readouterr().out
    assert "confidence: same figures" in out and "random-cv0.10: not in" in out
    assert "random-cv0.05: no committed file" in out
    (tmp_path / "confidence.json").write_text(json.dumps({**committed, "power_10pct": 0.5}))
    assert regenerate.compare(runs, tmp_path) == 1
    assert "confidence: differs at .power_10pct" in capsys.readouterr().out


def test_an_unreadable_result_is_reported_not_raised(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "confidence.json").write_text("{truncated")
    runs = [r for r in regenerate._runs() if r.name == "confidence"]
    assert regenerate.compare(runs, tmp_path) == 1
    assert "confidence: cannot be compared" in capsys.readouterr().out


def test_an_unwritable_out_dir_is_one_sentence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert regenerate.main(["--only", "confidence", "--out", str(blocker / "sub")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--out" in err


def test_summary_has_a_row_per_optimiser_file_and_the_confidence_line() -> None:
    table = regenerate.summary(KEPT_RUNS, RESULTS)
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| result file")]
    assert [row.split(" | ")[0][2:] for row in rows] == [r.name for r in KEPT_RUNS if r.script == "optimiser"]
    random10 = json.loads((RESULTS / "random-cv0.10.json").read_text())
    row = next(r for r in rows if r.startswith("| random-cv0.10 |"))
    assert f"{random10['verdict']['probes_ratio_1d']:.3f} / {random10['verdict']['probes_ratio_2d']:.3f}" in row
    tuner = sum(s["methods"]["tuner"]["success_rate"] for s in random10["surfaces"])
    assert f"| {tuner:.2f} / " in row
    adversary = json.loads((RESULTS / "adversary-cv0.10.json").read_text())
    line = next(line for line in table.splitlines() if line.startswith("adversary-cv0.10: "))
    assert f"on each of {len(adversary['surfaces'])} surfaces" in line
    assert f"{adversary['verdict']['identical_runs'][0]} of {adversary['verdict']['identical_runs'][1]} untouched" in line
    # The per-surface target as a rate over the draws: every surface an interval puts below -5 in any
    # 100-seed one-knob draw file, out of all the surfaces in them, and how many of those are sealed.
    files = sorted(RESULTS.glob("*-h1*-100seeds-cv*.json"))
    missed = {m for f in files for m in json.loads(f.read_text())["verdict"]["success_target_by_interval"]["missed"]}
    total = {x["name"] for f in files for x in json.loads(f.read_text())["surfaces"]}
    sealed = {x["name"] for f in files if f.name.startswith("holdout-") for x in json.loads(f.read_text())["surfaces"]}
    assert len(files) == 2 and missed and sealed
    assert (f"one-knob hold-out draws, 100 seeds: established misses at CV 0.05 or 0.10 on {len(missed)} of "
            f"{len(total)} surfaces in {len(files)} draws") in table
    assert f"{len(missed & sealed)} of {len(sealed)} in the sealed draw: " in table
    assert all(m in table for m in missed) and "two-knob hold-out draws, 30 seeds (100 for the closest surfaces): " in table
    confidence = json.loads((RESULTS / "confidence.json").read_text())
    assert f"power for a 10 % effect at CV 5 % {confidence['power_10pct']:.3f}" in table


def _docs_block() -> list[str]:
    doc = (ROOT / "docs" / "results.md").read_text()
    assert regenerate.SUMMARY_START in doc and regenerate.SUMMARY_END in doc
    return doc.split(regenerate.SUMMARY_START, 1)[1].split(regenerate.SUMMARY_END, 1)[0].splitlines()


def test_the_docs_summary_has_a_row_per_run_in_order() -> None:
    # A run added, dropped or renamed without a full regeneration leaves the block out of step with the runs.
    block = _docs_block()
    rows = [line.split(" | ")[0][2:] for line in block[2:] if line.startswith("| ")]
    runs = regenerate._runs()
    assert rows == [r.name for r in runs if r.script == "optimiser"]
    tail = [line.split(": ")[0] for line in block if line and not line.startswith("|")]
    assert tail == [r.name for r in runs if r.script != "optimiser"] + [
        "one-knob hold-out draws, 100 seeds", "two-knob hold-out draws, 30 seeds (100 for the closest surfaces)"]


def test_the_docs_rows_of_the_committed_files_are_their_summary() -> None:
    # A committed file regenerated without a refreshed page (or a hand-edited figure) fails here:
    # `python benchmarks/regenerate.py --summary` prints what belongs, a full run rewrites the block.
    block = set(_docs_block())
    computed = regenerate.summary(KEPT_RUNS, RESULTS).splitlines()
    mine = [line for line in computed if line.startswith(tuple(f"| {n} |" for n in regenerate.KEPT))
            or line.startswith(tuple(f"{n}: " for n in regenerate.KEPT))]
    assert len(mine) == len(regenerate.KEPT)
    assert [line for line in mine if line not in block] == []
    # The draw-rate lines sum over files that are not all committed; each miss in the committed ones is there.
    rate = next(line for line in block if line.startswith("one-knob hold-out draws, 100 seeds: "))
    for f in RESULTS.glob("*-h1*-100seeds-cv*.json"):
        r = json.loads(f.read_text())
        for m in r["verdict"]["success_target_by_interval"]["missed"]:
            assert f"{m} (CV {r['noise_cv']:.2f}, 100 seeds" in rate, m


def test_rewrite_summary_replaces_only_the_block(tmp_path: Path) -> None:
    doc = tmp_path / "results.md"
    doc.write_text(f"before\n{regenerate.SUMMARY_START}old\n{regenerate.SUMMARY_END}\nafter\n")
    regenerate.rewrite_summary("new\n", doc)
    assert doc.read_text() == f"before\n{regenerate.SUMMARY_START}new\n{regenerate.SUMMARY_END}\nafter\n"
    doc.write_text("no markers\n")
    with pytest.raises(ValueError):
        regenerate.rewrite_summary("new\n", doc)


def test_a_run_rewrites_the_docs_only_from_a_complete_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    doc = tmp_path / "results.md"
    page = f"text\n{regenerate.SUMMARY_START}old\n{regenerate.SUMMARY_END}\nmore\n"
    doc.write_text(page)
    regenerate._refresh_docs(tmp_path, doc)  # no result files there
    assert doc.read_text() == page and "left as it is" in capsys.readouterr().out
    monkeypatch.setattr(regenerate, "_runs", lambda: KEPT_RUNS)
    regenerate._refresh_docs(RESULTS, doc)
    assert doc.read_text() == page.replace("old\n", regenerate.summary(KEPT_RUNS, RESULTS))


def test_summary_of_an_incomplete_directory_is_one_sentence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert regenerate.main(["--summary", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "optimiser-cv0.05.json" in err
    (tmp_path / "confidence.json").write_text("{not json")
    assert regenerate.main(["--summary", str(tmp_path), "--only", "confidence"]) == 2
    assert "cannot read" in capsys.readouterr().err
