"""Issue 44, item 12: the daemon locks the code it has touched in RAM, so drop_caches (a cold probe) cannot evict
it and /metrics does not stall reading it back. Run in a child process (locked pages stay locked until exit). The
effect on /metrics latency is measured in benchmarks/daemon_idle.py, not here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

CHILD = """
import json
from tuner.daemon.residency import lock_working_set
first = lock_working_set()
second = lock_working_set()
status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if l.startswith("Vm"))
print(json.dumps({"first": first.bytes_locked, "second": second.bytes_locked, "problem": first.problem,
                  "vmlck_kb": int(status["VmLck"].split()[0]), "vmrss_kb": int(status["VmRSS"].split()[0])}))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="locking needs CAP_IPC_LOCK (the daemon runs as root to drop caches)")
def test_the_touched_code_is_locked_and_locking_twice_locks_nothing_more() -> None:
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["problem"] is None
    assert got["first"] > 1 << 20  # at least the interpreter's own code
    assert got["vmlck_kb"] * 1024 >= got["first"] * 0.9 and got["vmlck_kb"] <= got["vmrss_kb"]
    assert abs(got["second"] - got["first"]) <= got["first"] * 0.1  # the working set, not whole libraries


def test_without_the_privilege_it_says_why_and_locks_nothing() -> None:
    # RLIMIT_MEMLOCK 0, and (as root) no longer root, so without CAP_IPC_LOCK; imports first, while readable.
    child = ("import resource, json, os; from tuner.daemon.residency import lock_working_set; "
             "resource.setrlimit(resource.RLIMIT_MEMLOCK, (0, 0)); "
             "os.setuid(65534) if os.geteuid() == 0 else None; r = lock_working_set(); "
             "print(json.dumps({'problem': r.problem, 'locked': r.bytes_locked}))")
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(REPO)}, cwd="/")
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["locked"] == 0 and ("mlock failed" in got["problem"] or "pagemap cannot be read" in got["problem"])


def test_a_lock_that_fails_is_said_once_at_warning_with_the_fix_then_only_at_debug() -> None:
    from structlog.testing import capture_logs

    from tuner.daemon.residency import FIX, Locked, LockNotice

    notice, failed = LockNotice(), Locked(7 << 20, 12, "mlock failed after 7 MiB: Cannot allocate memory")
    with capture_logs() as logs:
        for _ in range(3):  # three sessions
            notice(failed)
    loud = [e for e in logs if e["log_level"] not in ("debug",)]
    assert len(loud) == 1 and loud[0]["log_level"] == "warning" and loud[0]["fix"] == FIX
    assert "LimitMEMLOCK" in FIX
