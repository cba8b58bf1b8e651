"""How long `tuner restore` takes for a huge journal, against the cost of writing that journal once.

    python benchmarks/journal_restore.py [--entries 200000] [--json OUT]

A journal of ``--entries`` readahead entries written in another boot (so each is dropped, not written to sysfs: the
measurement is the journal's own bookkeeping) under a tree of plain files standing in for /sys. Measured in the
same run: the baseline, one parse of the journal plus one atomic rewrite of it (what restoring must do at least
once), and a whole restore through ``Journal.recover()``. Target (issue 44): the restore finishes, and costs at most
25 baselines — before, it rewrote and fsynced the whole file per entry (200,000 entries: 11 restored in 60 s).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tuner.actuate import Journal  # noqa: E402
from tuner.actuate.journal import JOURNAL_NAME  # noqa: E402
from tuner.actuate.sysfs import SysfsWriter  # noqa: E402
from tuner.fs.atomic import atomic_write  # noqa: E402
from tuner.log import configure  # noqa: E402

TARGET_RATIO = 25.0


def _journal(state: Path, sys_root: Path, entries: int) -> str:
    (sys_root / "block").mkdir(parents=True)
    changes = [{"kind": "sysfs", "path": f"{sys_root}/block/bench{i}/queue/read_ahead_kb", "device": f"/dev/bench{i}",
                "name": "read_ahead_kb", "original": "128", "recorded_at": "2026-01-01T00:00:00+00:00"}
               for i in range(entries)]
    doc = {"version": 1, "owner": {"pid": 1, "start": "1", "host": "elsewhere", "boot_id": "another-boot",
                                   "session": "bench", "opened_at": "2026-01-01T00:00:00+00:00"},
           "changes": changes}
    text = json.dumps(doc, indent=2) + "\n"
    state.mkdir(mode=0o700)
    (state / JOURNAL_NAME).write_text(text)
    return text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=200_000)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    configure("warning", json=True)  # one log line per entry at info would measure the terminal
    with tempfile.TemporaryDirectory(prefix="tuner-bench-journal-") as tmp:
        state, sys_root = Path(tmp) / "state", Path(tmp) / "sys"
        text = _journal(state, sys_root, args.entries)
        t = time.perf_counter()
        doc = json.loads((state / JOURNAL_NAME).read_text())
        atomic_write(Path(tmp) / "copy.json", json.dumps(doc, indent=2) + "\n", dir_mode=0o700)
        baseline_s = time.perf_counter() - t
        t = time.perf_counter()
        done = Journal(state, writer=SysfsWriter(sys_root=sys_root)).recover()
        restore_s = time.perf_counter() - t
        left = (state / JOURNAL_NAME).exists()
    result = {
        "entries": args.entries, "journal_bytes": len(text), "restored_or_dropped": len(done),
        "journal_left": left, "baseline_one_rewrite_s": round(baseline_s, 3), "restore_s": round(restore_s, 3),
        "ratio": round(restore_s / baseline_s, 2), "target_ratio": TARGET_RATIO,
        "ok": len(done) == args.entries and not left and restore_s / baseline_s <= TARGET_RATIO,
        "machine": {"cpus": os.cpu_count(), "loadavg_1m_5m_15m": os.getloadavg(), "python": platform.python_version()},
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    out = json.dumps(result, indent=2)
    print(out)
    if args.json:
        args.json.write_text(out + "\n")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
