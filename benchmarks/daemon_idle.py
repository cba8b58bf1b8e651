"""The daemon's footprint: idle RSS and CPU, and how fast /metrics answers while a session runs.

    python benchmarks/daemon_idle.py [--idle-s 300] [--scale 2] [--json OUT]

It starts `tuner daemon --sandbox` (its own throwaway PostgreSQL; no schedule, a drift check every 10 minutes),
waits until it is ready, then measures the daemon process alone (not its PostgreSQL) from /proc:

* idle: RSS (VmRSS, and VmHWM, the peak) and CPU time over ``--idle-s`` seconds (target: RSS <= 150 MB, CPU <= 1 %);
* /metrics latency: N requests while idle (the baseline, measured in the same run), then N while a session runs
  (POST /v1/sessions): median, p95, p99 and max, and the ratio of the busy median to the idle one (targets, issue
  44: p99 <= 50 ms and max <= 200 ms during the session); each answer slower than 50 ms is listed with the daemon's
  log events around it, to see what held the event loop;
* RSS after the session (the optimiser stack is imported lazily, by the first session, and stays).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TICK = os.sysconf("SC_CLK_TCK")


def _rss(pid: int) -> dict[str, float]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024  # MiB
    return fields


def _majflt(pid: int) -> int:
    """Major page faults of ``pid`` so far: pages it had to read back from disk (code evicted by drop_caches, say)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2:].split()[9])


def _cpu_s(pid: int) -> float:
    stat = Path(f"/proc/{pid}/stat").read_text()
    parts = stat[stat.rindex(")") + 2:].split()
    return (int(parts[11]) + int(parts[12])) / TICK  # utime + stime


def _get(port: int, path: str, token: str | None = None, method: str = "GET") -> tuple[int, bytes, float]:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                 data=b"{}" if method == "POST" else None)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    t0 = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            body, status = resp.read(), resp.status
    except urllib.error.HTTPError as err:
        body, status = err.read(), err.code
    return status, body, (time.perf_counter() - t0) * 1000


SLOW_MS = 50.0  # a /metrics answer slower than this is listed with what the daemon logged around it


def _latencies(port: int, n: int, pause_s: float, stamps: list[tuple[float, float, int]] | None = None,
               pid: int | None = None) -> list[float]:
    out = []
    for _ in range(n):
        t = time.time()
        faults = _majflt(pid) if pid else 0
        status, _, ms = _get(port, "/metrics")
        assert status == 200
        out.append(ms)
        if stamps is not None:
            stamps.append((t, ms, (_majflt(pid) - faults) if pid else 0))
        time.sleep(pause_s)
    return out


def _summary(ms: list[float]) -> dict[str, float]:
    ordered = sorted(ms)
    return {"n": len(ms), "median_ms": round(statistics.median(ms), 2),
            "p95_ms": round(ordered[int(0.95 * (len(ms) - 1))], 2),
            "p99_ms": round(ordered[int(0.99 * (len(ms) - 1))], 2), "max_ms": round(max(ms), 2)}


def _near(log_path: Path, slow: list[tuple[float, float, int]], window_s: float = 1.0) -> list[dict[str, Any]]:
    """Each slow request with the daemon's log events that started within ``window_s`` before it or during it."""
    from datetime import datetime

    events = []
    for line in log_path.read_text(errors="replace").splitlines():
        try:
            doc = json.loads(line)
            at = datetime.fromisoformat(doc["timestamp"].replace("Z", "+00:00")).timestamp()
        except (ValueError, KeyError, TypeError):
            continue
        events.append((at, doc.get("event")))
    out = []
    for t, ms, faults in slow:
        around = sorted({e for at, e in events if t - window_s <= at <= t + ms / 1000})
        out.append({"at": round(t, 3), "ms": round(ms, 1), "major_faults_meanwhile": faults, "events": around})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--idle-s", type=float, default=300)
    ap.add_argument("--scale", type=int, default=2)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="tuner-bench-daemon-"))
    token = secrets.token_hex(24)
    (work / "token").write_text(token)
    (work / "token").chmod(0o600)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (work / "tuner.toml").write_text(
        f'[tuner]\nstate_dir = "{work / "state"}"\nfamilies = ["concurrency"]\n'
        f'[daemon]\nlisten = "127.0.0.1:{port}"\ntoken_file = "{work / "token"}"\nschedule = ""\n'
        f'drift_check_every = "10m"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "TUNER_"))}
    log = (work / "daemon.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "tuner", "daemon", "--sandbox", "--scale", str(args.scale),
                             "--config", str(work / "tuner.toml")], cwd=work, env=env, stdout=log, stderr=log)
    result: dict[str, Any] = {"design": {"idle_s": args.idle_s, "scale": args.scale, "requests": args.requests,
                                         "targets": {"rss_mb": 150, "cpu_share": 0.01, "metrics_ms": 50}}}
    try:
        deadline = time.monotonic() + 900
        while True:
            try:
                if _get(port, "/readyz")[0] == 200:
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the daemon did not become ready; see {work / 'daemon.log'}")
            time.sleep(0.5)
        time.sleep(5)  # let start-up settle
        rss0, cpu0, t0 = _rss(proc.pid), _cpu_s(proc.pid), time.monotonic()
        time.sleep(args.idle_s)
        rss1, cpu1, t1 = _rss(proc.pid), _cpu_s(proc.pid), time.monotonic()
        result["idle"] = {"seconds": round(t1 - t0, 1), "rss_mb": round(rss1["VmRSS"], 1),
                          "rss_peak_mb": round(rss1["VmHWM"], 1), "rss_at_start_mb": round(rss0["VmRSS"], 1),
                          "cpu_s": round(cpu1 - cpu0, 3), "cpu_share": round((cpu1 - cpu0) / (t1 - t0), 5)}
        print(f"idle: {result['idle']}", file=sys.stderr)
        idle_ms = _latencies(port, args.requests, 0.02)
        status, body, _ = _get(port, "/v1/sessions", token, "POST")
        assert status == 202, body
        run_id = json.loads(body)["id"]
        busy_ms: list[float] = []
        stamps: list[tuple[float, float, int]] = []
        faults0 = _majflt(proc.pid)
        while True:
            _, doc, _ = _get(port, f"/v1/sessions/{run_id}")
            run = json.loads(doc)["run"]
            if run["status"] not in ("queued", "running"):
                break
            if run["status"] == "running":
                busy_ms += _latencies(port, 10, 0.05, stamps, proc.pid)
            else:
                time.sleep(0.2)
        result["session"] = {"id": run_id, "status": run["status"], "detail": run["detail"]}
        result["metrics_idle"] = _summary(idle_ms)
        result["metrics_during_session"] = _summary(busy_ms) if busy_ms else None
        result["major_faults_during_session"] = _majflt(proc.pid) - faults0
        result["major_faults_while_answering"] = sum(f for _, _, f in stamps)
        result["slow_during_session"] = _near(work / "daemon.log", [x for x in stamps if x[1] > SLOW_MS])
        result["load"] = {"loadavg_1m_5m_15m_at_end": os.getloadavg(), "cpus": os.cpu_count()}
        if busy_ms:
            result["metrics_ratio_busy_to_idle_median"] = round(statistics.median(busy_ms) / statistics.median(idle_ms), 2)
        result["after_session"] = {k.lower(): round(v, 1) for k, v in _rss(proc.pid).items()}
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            result["sigterm_exit"] = proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            result["sigterm_exit"] = "killed"
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
