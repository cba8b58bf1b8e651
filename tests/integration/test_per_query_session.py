"""Issue #56 item 4 through a real session: ``tuner recommend --sandbox`` with two queries of the operator's own
(``[workload] queries``) and a small budget; the report's confirmation carries each query's own times and paired
interval, and the table shows a line per query."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from .conftest import tuner_env

# Two sparse bitmap heap scans of different sizes over the sandbox's uncorrelated balances (about 1000 and 400 of
# 200,000 accounts).
_QUERIES = ("SELECT count(filler) FROM pgbench_accounts WHERE abalance BETWEEN 0 AND 50000",
            "SELECT count(filler) FROM pgbench_accounts WHERE abalance BETWEEN -3000000 AND -2980000")
_POLICY = """
[policy]
name = "per-query-quick"
description = "effective_io_concurrency over the workload's queries: three search probes, four pairs."

# Today's 1 is outside the searched range, so the search's best always differs from it and is confirmed in paired
# trials (whatever the decision): the confirmation's pairs are what the per-query intervals are read from. (With 1
# inside the range, a run where 1 measured best had no confirmation and nothing to show.)
[search.effective_io_concurrency]
min = 16
max = 256
scale = "log2p1"
initial = [32, 128]

[budget]
probes = 3
min_probes = 3
confirm_min_pairs = 4
confirm_max_pairs = 4

[cache]
# The queries scan one table in one cold session: the second finds the pages it shares with the first cached.
min_cold_read_fraction = 0.5
"""


def test_a_session_on_two_custom_queries_reports_each_querys_interval(base_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "policy.toml").write_text(_POLICY)
    (tmp_path / "tuner.toml").write_text("[workload]\nqueries = [\n" + "".join(f"  {json.dumps(q)},\n" for q in _QUERIES)
                                         + "]\n")
    out_dir = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "tuner", "recommend", "--sandbox", "--scale", "2", "--family", "concurrency",
         "--config", str(tmp_path / "tuner.toml"), "--policy", str(tmp_path / "policy.toml"), "--format", "json",
         "--output", str(out_dir)],
        capture_output=True, text=True, cwd=tmp_path, timeout=900,
        env=tuner_env(tmp_path / "state", TUNER_SANDBOX__BASE_DIR=str(base_dir)),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    [fam] = doc["families"]
    assert fam["status"] == "done", fam
    assert [s["name"] for s in fam["statements"]] == ["custom query 1", "custom query 2"]
    assert fam["statements"][0]["text"] == _QUERIES[0] and fam["statements"][0]["share"] is None
    ok = [t for t in doc["trials"] if t["status"] == "ok"]
    assert ok and all(set(t["query_ms"]) == {"custom query 1", "custom query 2"} for t in ok)
    assert all(abs(sum(t["query_ms"].values()) - t["value"]) < 1e-6 * t["value"] for t in ok)  # weights are 1
    [rec] = doc["recommendations"]
    # Today's 1 against the search's best of 16..256: always confirmed in paired trials, whatever the decision.
    assert rec["effect"] is not None, rec
    queries = rec["effect"]["queries"]
    assert [q["name"] for q in queries] == ["custom query 1", "custom query 2"]
    confirm = [t for t in ok if t["phase"] == "confirm"]
    for q in queries:
        assert q["n_pairs"] == rec["effect"]["n_pairs"] == 4
        lo, hi = q["ci95"]
        assert lo <= q["improvement"] <= hi and q["baseline_ms"] > 0 and q["candidate_ms"] > 0
        times = sorted(t["query_ms"][q["name"]] for t in confirm if t["arm"] == "baseline")
        assert times[0] <= q["baseline_ms"] <= times[-1]
    assert abs(sum(q["time_share"] for q in queries) - 1) < 0.01
    [group] = doc["per_query"]
    assert [line["share_of"] for line in group["queries"]] == ["time today", "time today"]
    table = (out_dir / "report.txt").read_text()
    assert "per query: effective_io_concurrency" in table
    for n in (1, 2):  # the text wraps inside its cell (where depends on the
        # other columns' widths); the figures stand on the query's first line
        assert re.search(rf"│ custom query {n} SELECT count\(filler\)[^│\n]*│ \d+% of time today +│ [\d.]+ +│ [\d.]+ +│ "
                         r"[\d.]+x \[[\d.]+–[\d.]+\] +│ 4 +│", table), table
