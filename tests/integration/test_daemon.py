"""`tuner daemon` as a real process against the real staging clone (PostgreSQL 15): sessions on request and on a
one-minute schedule, stored and served; drift detected and answered; SIGHUP with a broken file; a second daemon
refused; SIGKILL mid-session and the restart that restores; SIGTERM within 30 s."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.conftest import Clone, clone_env, wait_for
from tuner.target.connection import connect

FAULTS_POLICY = Path(__file__).parent.parent / "fixtures" / "policies" / "good" / "faults.toml"
TOKEN = "t0ken-for-the-daemon-tests-0123456789"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _policy(tmp: Path) -> Path:
    """The fault suite's small budgets, with a daemon confirmation as small (the daemon's default is long)."""
    path = tmp / "daemon-policy.toml"
    text = FAULTS_POLICY.read_text().replace('name = "faults"', 'name = "daemon-tests"')
    path.write_text(text + "\n[daemon]\nconfirm_min_pairs = 2\nconfirm_max_pairs = 4\nconfirm_looks = []\n")
    return path


class Daemon:
    """One `tuner daemon` process of a test's own, and HTTP calls to it."""

    def __init__(self, clone: Clone, tmp: Path, *, families: list[str], schedule: str = "",
                 drift: str = "2s", extra: str = "", state: Path | None = None) -> None:
        self.tmp, self.port = tmp, _free_port()
        self.state = state or tmp / "state"
        token = tmp / "token"
        token.write_text(TOKEN + "\n")
        token.chmod(0o600)
        self.config = tmp / "tuner.toml"
        self.text = (
            f'[tuner]\npolicy = "{_policy(tmp)}"\nfamilies = {json.dumps(families)}\n'
            f'[daemon]\nlisten = "127.0.0.1:{self.port}"\ntoken_file = "{token}"\nschedule = "{schedule}"\n'
            f'drift_check_every = "{drift}"\nrevalidate_every = "7d"\n{extra}')
        self.config.write_text(self.text)
        self.env = clone_env(clone, self.state, TUNER_TARGET__DSN=clone.dsn)
        self.proc: subprocess.Popen[str] | None = None
        self.log = tmp / f"daemon-{time.monotonic_ns()}.log"

    def start(self) -> Daemon:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tuner", "daemon", "--config", str(self.config)],
            stdout=subprocess.PIPE, stderr=self.log.open("w"), text=True, cwd=self.tmp, env=self.env)
        assert wait_for(lambda: self.ready() or self.proc.poll() is not None, 120), self.stderr()  # type: ignore[union-attr]
        assert self.proc.poll() is None, self.stderr()
        return self

    def stderr(self) -> str:
        return self.log.read_text()[-4000:] if self.log.exists() else ""

    def ready(self) -> bool:
        try:
            return self.get("/readyz")[0] == 200
        except OSError:
            return False

    def call(self, method: str, path: str, *, token: str | None = TOKEN, body: Any = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data, method=method)
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                raw, status, ctype = resp.read(), resp.status, resp.headers.get("Content-Type", "")
        except urllib.error.HTTPError as err:
            raw, status, ctype = err.read(), err.code, err.headers.get("Content-Type", "")
        return status, (json.loads(raw) if "json" in ctype else raw.decode())

    def get(self, path: str, **kw: Any) -> tuple[int, Any]:
        return self.call("GET", path, **kw)

    def run(self, run_id: str) -> dict[str, Any] | None:
        status, doc = self.get(f"/v1/sessions/{run_id}")
        return doc["run"] if status == 200 else None

    def wait_run(self, predicate: Any, timeout_s: float, what: str) -> dict[str, Any]:
        found: dict[str, Any] = {}

        def look() -> bool:
            assert self.proc is not None and self.proc.poll() is None, self.stderr()
            for run in self.get("/v1/sessions?limit=100")[1]["runs"]:
                if predicate(run):
                    found.update(run)
                    return True
            return False

        assert wait_for(look, timeout_s), f"no run {what}: {self.get('/v1/sessions')[1]['runs']}\n{self.stderr()}"
        return found

    def metrics(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        status, text = self.get("/metrics")
        assert status == 200
        return {(s.name, tuple(sorted(s.labels.items()))): s.value
                for fam in text_string_to_metric_families(text) for s in fam.samples}

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 30) -> tuple[int, float]:
        assert self.proc is not None
        t0 = time.monotonic()
        self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout_s)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(30)
        return code, time.monotonic() - t0


def _sql(dsn: str, *statements: str) -> list[Any]:
    async def go() -> list[Any]:
        conn = await connect(dsn)
        try:
            return [await conn.fetchval(s) for s in statements]
        finally:
            await conn.close()

    return asyncio.run(go())


def _read_ahead(clone: Clone) -> int:
    return int(Path(f"/sys/block/{clone.disk.name}/queue/read_ahead_kb").read_text())


def _set_read_ahead(clone: Clone, value: int) -> None:
    Path(f"/sys/block/{clone.disk.name}/queue/read_ahead_kb").write_text(str(value))


@pytest.fixture()
def daemon_proc(clone: Clone, tmp_path: Path) -> Any:
    made: list[Daemon] = []

    def make(**kw: Any) -> Daemon:
        d = Daemon(clone, tmp_path, **kw)
        made.append(d)
        return d

    yield make
    for d in made:
        if d.proc is not None and d.proc.poll() is None:
            d.proc.kill()
            d.proc.wait(30)


def test_sessions_on_request_and_schedule_are_stored_served_and_drift_is_answered(
    clone: Clone, tmp_path: Path, daemon_proc: Any
) -> None:
    d = daemon_proc(families=["concurrency"]).start()
    # Read-only without the token; POST needs it.
    assert d.get("/healthz", token=None)[0] == 200
    assert d.call("POST", "/v1/sessions", token=None, body={})[0] == 401
    assert d.call("POST", "/v1/sessions", token="wrong-token-wrong-token", body={})[0] == 401
    status, queued = d.call("POST", "/v1/sessions", body={"target": "default"})
    assert status == 202 and queued["status"] == "queued", queued
    done = d.wait_run(lambda r: r["id"] == queued["id"] and r["status"] not in ("queued", "running"), 600,
                      "requested over the API that ended")
    assert done["status"] == "done", done
    status, doc = d.get(f"/v1/sessions/{queued['id']}")
    report = doc["report"]
    assert status == 200 and report["session"]["id"] == queued["id"]
    assert "password" not in json.dumps(doc).lower()
    # What config management pulls: exactly the stored report's "change" decisions.
    changes = [r for r in report["recommendations"] if r["decision"] == "change"]
    status, recs = d.get("/v1/recommendations")
    [target] = recs["targets"]
    assert status == 200 and target["target"] == "default"
    assert [(r["knob"], r["recommended"]) for r in target["recommendations"]] == \
        [(r["knob"], r["recommended"]) for r in changes]
    for r in target["recommendations"]:
        assert r["apply_sql"] and r["rollback_sql"] and r["session_id"] == queued["id"]
    # What limited the reads, as the newest stored session measured it on the clone's data device.
    assert target["io_regime"] == report["io_regime"] and report["io_regime"], report["io_regime"]
    assert target["io_regime"][0]["regime"] in ("latency", "iops", "throughput", "cpu"), target["io_regime"]
    status, conf = d.get("/v1/recommendations/default?format=conf&file=conf.d/99-tuner.conf")
    if changes:
        assert status == 200 and all(f"{r['knob']} = {r['recommended']}" in conf for r in changes), conf
    else:  # nothing in force: a file that sets nothing (a pull removes what an earlier one put in place)
        assert status == 200 and "effective_io_concurrency =" not in conf, conf
    assert d.get("/v1/recommendations/elsewhere?format=conf")[0] == 404
    m = d.metrics()
    assert m[("tuner_probes_total", (("target", "default"),))] >= len(report["trials"])
    assert m[("tuner_last_session_timestamp_seconds", (("target", "default"),))] > time.time() - 3600
    assert m[("tuner_session_running", (("target", "default"),))] == 0
    for r in changes:
        assert m[("tuner_recommended_setting", (("knob", r["knob"]), ("object", ""), ("target", "default")))] == \
            r["recommended"]

    # A one-minute schedule (taken by a reload) queues a session of its own, which runs and is stored.
    d.text = d.text.replace('schedule = ""', 'schedule = "* * * * *"')
    d.config.write_text(d.text)
    d.proc.send_signal(signal.SIGHUP)  # type: ignore[union-attr]
    sched = d.wait_run(lambda r: r["reason"].startswith("schedule") and r["status"] == "done", 420,
                       "from the schedule that finished")
    history = subprocess.run([sys.executable, "-m", "tuner", "history", "--config", str(d.config), "--format",
                              "json"], capture_output=True, text=True, env=d.env, cwd=tmp_path, timeout=60)
    assert history.returncode == 0, history.stderr
    listed = {s["id"] for s in json.loads(history.stdout)}
    assert {queued["id"], sched["id"]} <= listed

    # Another reload: no schedule any more, and readahead among the target's families (drift re-probes only the
    # families a target is configured for).
    d.text = d.text.replace('schedule = "* * * * *"', 'schedule = ""').replace(
        'families = ["concurrency"]', 'families = ["concurrency", "readahead"]')
    d.config.write_text(d.text)
    d.proc.send_signal(signal.SIGHUP)  # type: ignore[union-attr]
    assert wait_for(lambda: "daemon.reloaded" in d.log.read_text(), 30), d.stderr()
    assert wait_for(lambda: not any(r["status"] in ("queued", "running")
                                    for r in d.get("/v1/sessions")[1]["runs"]), 300), d.stderr()

    # A hand-edited setting: detected within one drift interval, recorded with from/to, answered by a run. The
    # answer depends on what is in force *now* — the first session and the scheduled one may each have recommended a
    # change or not (on a loaded machine either happens), and a later "keep" of another value withdraws an earlier
    # change — so it is read from the API, which serves exactly what the daemon decides on, not assumed.
    in_force = [r for r in d.get("/v1/recommendations")[1]["targets"][0]["recommendations"]
                if r["knob"] == "effective_io_concurrency"]
    before = _sql(clone.dsn, "SHOW effective_io_concurrency")[0]
    try:
        _sql(clone.dsn, "ALTER SYSTEM SET effective_io_concurrency = 7", "SELECT pg_reload_conf()")
        assert wait_for(lambda: any("setting:effective_io_concurrency" in e["changes"]
                                    for e in d.get("/v1/drift")[1]["events"]), 60), d.stderr()
        event = next(e for e in d.get("/v1/drift")[1]["events"] if "setting:effective_io_concurrency" in e["changes"])
        change = event["changes"]["setting:effective_io_concurrency"]
        assert str(change["from"]).startswith(before) or before in json.dumps(change["from"])
        assert "7" in json.dumps(change["to"])
        kind = "revalidate" if in_force else "reprobe"
        assert event["action"].startswith(kind), (event, in_force)
        if kind == "reprobe":  # nothing to re-validate: the concurrency family is probed again, and says why
            assert "no accepted recommendation to re-validate" in event["action"], event
        answered = d.wait_run(lambda r: r["reason"].startswith("drift:") and r["kind"] == kind
                              and r["status"] == "done", 600, f"{kind} after the drift that finished")
        assert answered["kind"] == kind
        if kind == "reprobe":
            assert answered["families"] == ["concurrency"], answered
        else:  # the re-validation pinned the recommendation in force
            assert answered["knobs"] == ["effective_io_concurrency"], answered
        m = d.metrics()
        assert m[("tuner_drift_events_total", (("target", "default"),))] >= 1
    finally:
        _sql(clone.dsn, "ALTER SYSTEM RESET effective_io_concurrency", "SELECT pg_reload_conf()")

    # A device's read_ahead_kb changed by hand: the same, answered by a re-probe of the readahead family.
    original = _read_ahead(clone)
    key = f"device:{clone.disk.name}:read_ahead_kb"
    try:
        _set_read_ahead(clone, original + 64)
        assert wait_for(lambda: any(key in e["changes"] for e in d.get("/v1/drift")[1]["events"]), 60), d.stderr()
        event = next(e for e in d.get("/v1/drift")[1]["events"] if key in e["changes"])
        assert (event["changes"][key]["from"], event["changes"][key]["to"]) == (original, original + 64)
        assert event["action"].startswith("reprobe"), event
        # (one drift event may carry this change and the RESET above together: one re-probe of both families)
        reprobe = d.wait_run(lambda r: r["kind"] == "reprobe" and "readahead" in r["families"]
                             and r["status"] not in ("queued", "running"), 600, "re-probing readahead that ended")
        assert reprobe["status"] == "done", reprobe
        assert _read_ahead(clone) == original + 64  # the session put back what it found: the operator's value
    finally:
        _set_read_ahead(clone, original)

    # SIGHUP with a broken file keeps it serving, and says so in /metrics; a good file again restores it.
    d.config.write_text(d.text + "\n[daemon.oops\n")
    d.proc.send_signal(signal.SIGHUP)  # type: ignore[union-attr]
    assert wait_for(lambda: d.metrics()[("tuner_config_last_reload_successful", ())] == 0, 30), d.stderr()
    assert d.get("/healthz")[0] == 200 and d.ready()
    d.config.write_text(d.text)
    d.proc.send_signal(signal.SIGHUP)  # type: ignore[union-attr]
    assert wait_for(lambda: d.metrics()[("tuner_config_last_reload_successful", ())] == 1, 30), d.stderr()

    # A second daemon on the same state directory is refused with one sentence.
    second = subprocess.run([sys.executable, "-m", "tuner", "daemon", "--config", str(d.config), "--listen",
                             f"127.0.0.1:{_free_port()}"], capture_output=True, text=True, env=d.env,
                            cwd=tmp_path, timeout=60)
    assert second.returncode == 1, second.stderr
    said = [line for line in second.stderr.splitlines() if line.startswith("tuner: error:")]
    assert len(said) == 1 and "another tuner daemon" in said[0] and "Traceback" not in second.stderr

    code, took = d.stop()
    assert code == 0 and took < 30, d.stderr()


def test_sigkill_mid_session_then_restart_restores_first_records_interrupted_and_runs_again(
    clone: Clone, tmp_path: Path, daemon_proc: Any
) -> None:
    original = _read_ahead(clone)
    d = daemon_proc(families=["readahead"], drift="1h").start()
    journal = d.state / "journal.json"
    try:
        status, queued = d.call("POST", "/v1/sessions", body={})
        assert status == 202

        def changed() -> bool:
            try:
                return bool(json.loads(journal.read_text()).get("changes"))
            except (OSError, ValueError):
                return False

        assert wait_for(changed, 300), d.stderr()
        d.proc.kill()  # type: ignore[union-attr]
        d.proc.wait(30)  # type: ignore[union-attr]
        again = Daemon(clone, tmp_path, families=["readahead"], drift="1h", state=d.state)
        again.port, again.text = d.port, d.text
        again.config.write_text(d.text)
        again.start()
        try:
            assert _read_ahead(clone) == original  # restored before the daemon was ready
            interrupted = again.run(queued["id"])
            assert interrupted is not None and interrupted["status"] == "interrupted", interrupted
            rerun = again.wait_run(lambda r: f"again after interrupted {queued['id']}" in r["reason"]
                                   and r["status"] not in ("queued", "running"), 900, "that re-ran the work")
            assert rerun["status"] == "done", rerun
            code, took = again.stop()
            assert code == 0 and took < 30
        finally:
            if again.proc is not None and again.proc.poll() is None:
                again.proc.kill()
                again.proc.wait(30)
    finally:
        if _read_ahead(clone) != original:
            _set_read_ahead(clone, original)
    assert _read_ahead(clone) == original


def test_sigterm_mid_session_restores_and_exits_zero_within_30_s_and_systemd_hears_it(
    clone: Clone, tmp_path: Path, daemon_proc: Any
) -> None:
    original = _read_ahead(clone)
    d = daemon_proc(families=["readahead"], drift="1h")
    heard: list[str] = []
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(tmp_path / "notify"))
    sock.settimeout(0.2)

    def listen() -> None:
        with contextlib.suppress(OSError):
            while True:
                heard.append(sock.recv(4096).decode())

    d.env.update(NOTIFY_SOCKET=str(tmp_path / "notify"), WATCHDOG_USEC="2000000")
    d.start()
    d.env.pop("WATCHDOG_USEC")
    listen()
    assert any(m.startswith("READY=1") for m in heard), heard
    assert "WATCHDOG=1" in heard, heard  # every second (half of WATCHDOG_USEC)
    try:
        status, queued = d.call("POST", "/v1/sessions", body={})
        assert status == 202
        assert wait_for(lambda: (d.run(queued["id"]) or {}).get("status") == "running", 120), d.stderr()
        # Into the probes: the status line comes once the session has started, which a loaded machine can delay
        # well past a fixed sleep (a load average of 14 took more than 3 s).
        deadline = time.monotonic() + 90
        while not any(m.startswith("STATUS=session ") for m in heard) and time.monotonic() < deadline:
            time.sleep(0.5)
            listen()
        assert any(m.startswith("STATUS=session ") for m in heard), heard
        code, took = d.stop(signal.SIGTERM)
        assert code == 0 and took < 30, d.stderr()
        listen()
        assert any(m.startswith("STOPPING=1") for m in heard), heard
        assert not (d.state / "journal.json").exists() or not json.loads(
            (d.state / "journal.json").read_text()).get("changes")
        run = [json.loads(line) for line in d.stderr().splitlines() if '"daemon.run_ended"' in line]
        assert run and run[-1]["status"] == "deferred" and "SIGTERM" in run[-1]["detail"]
    finally:
        if _read_ahead(clone) != original:
            _set_read_ahead(clone, original)
            pytest.fail("read_ahead_kb was not restored")
    assert "daemon.stopped" in d.stderr()


def test_a_session_that_reaches_the_end_of_its_window_stops_cleanly_and_waits_for_the_next(
    clone: Clone, tmp_path: Path, daemon_proc: Any
) -> None:
    original = _read_ahead(clone)
    now = datetime.now(UTC)
    end = (now + timedelta(minutes=1)).replace(second=0, microsecond=0)
    if (end - now).total_seconds() < 25:
        end += timedelta(minutes=1)
    start = end - timedelta(minutes=5)
    window = f'windows = ["daily {start:%H:%M}-{end:%H:%M}"]\n'
    d = daemon_proc(families=["readahead", "concurrency", "wal"], drift="1h", extra=window)
    # Long enough to outlast the window's last 15 s on any machine: the fault suite's 0.4 s WAL loads let a whole
    # session finish first once (CI saw "done" where the window should have stopped it).
    policy = tmp_path / "daemon-policy.toml"
    policy.write_text(policy.read_text().replace("duration_s = 0.4", "duration_s = 5"))
    d.env["TZ"] = "UTC"
    d.start()
    try:
        # Queued for the window (open now), so that it may run only while the window is open.
        while (end - datetime.now(UTC)).total_seconds() > 15:
            time.sleep(0.5)
        status, queued = d.call("POST", "/v1/sessions", body={"in_window": True})
        assert status == 202 and queued["in_window"] is True
        ended = d.wait_run(lambda r: r["id"] == queued["id"] and r["status"] not in ("queued", "running"), 120,
                           "stopped by its window")
        assert ended["status"] == "deferred", json.dumps(ended)
        assert f"its maintenance window closed at {end:%H:%M}" in ended["detail"]
        assert datetime.fromisoformat(ended["ended_at"]) < end + timedelta(seconds=30)
        nxt = d.wait_run(lambda r: f"again after deferred {queued['id']}" in r["reason"], 10, "queued for the next window")
        assert nxt["status"] == "queued" and not nxt["forced"]
        time.sleep(3)  # the window is closed: it stays queued
        assert (d.run(nxt["id"]) or {}).get("status") == "queued"
        assert _read_ahead(clone) == original
        journal = d.state / "journal.json"
        assert not journal.exists() or not json.loads(journal.read_text()).get("changes")
        assert d.stop()[0] == 0
    finally:
        if _read_ahead(clone) != original:
            _set_read_ahead(clone, original)
            pytest.fail("read_ahead_kb was not restored")
