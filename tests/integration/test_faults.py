"""The fault suite: tuner stopped (SIGTERM, SIGINT, SIGHUP) or killed (SIGKILL) at many distinct points of a real
session on a real staging clone, then — after a kill — `tuner restore`; every case must leave
postgresql.auto.conf, every setting (value and source) and the loop device's read_ahead_kb exactly as before.

Points are named by the structured log lines a session writes to stderr (JSON when stderr is not a terminal):
the signal goes out when the n-th line matching a point has been read, so the process is somewhere in the step
after it — a probe's restart, its cache drop, its query, an ALTER SYSTEM, a WAL load.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tuner.target.connection import connect

from .conftest import Clone, clone_env

FAULTS = Path(__file__).parent.parent / "fixtures" / "policies" / "good" / "faults.toml"
Event = dict[str, Any]


_env = clone_env


class Session:
    """A `tuner recommend` process whose stderr log lines are read as they come."""

    def __init__(self, clone: Clone, tmp_path: Path, families: list[str], *extra: str) -> None:
        self.state = tmp_path / "state"
        self.stdout = tmp_path / "stdout.json"
        args = [sys.executable, "-m", "tuner", "recommend", "--dsn", clone.dsn, "--policy", str(FAULTS),
                "--format", "json", "--log-level", "debug", *extra]
        for f in families:
            args += ["--family", f]
        with self.stdout.open("w") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                                         env=_env(clone, self.state))
        self.lines: list[str] = []
        self.events: list[Event] = []
        self._seen = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._seen:
                self.lines.append(line)
                if line.startswith("{"):
                    try:
                        self.events.append(json.loads(line))
                    except json.JSONDecodeError:
                        pass
                self._seen.notify_all()
        with self._seen:
            self._seen.notify_all()

    def wait_for(self, point: Callable[[Event], bool], nth: int = 1, timeout_s: float = 240) -> None:
        deadline = time.monotonic() + timeout_s
        with self._seen:
            while sum(1 for e in self.events if point(e)) < nth:
                if self.proc.poll() is not None and self.proc.stderr is not None and self.proc.stderr.closed:
                    break
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self._seen.wait(0.5)):
                    break
                self._seen.wait(min(left, 1.0))
            if sum(1 for e in self.events if point(e)) < nth:
                self.kill()
                raise AssertionError(f"the point was not reached (exit {self.proc.returncode}):\n"
                                     + "".join(self.lines[-15:]))

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=60)

    def stop(self, sig: int, within_s: float = 30) -> float:
        """Send ``sig`` and return how long the process took to exit."""
        t0 = time.monotonic()
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=within_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"still running {within_s:g} s after {signal.Signals(sig).name}:\n"
                                 + "".join(self.lines[-15:])) from None
        time.sleep(0.2)  # let the reader thread drain stderr
        return time.monotonic() - t0

    @property
    def text(self) -> str:
        return "".join(self.lines)


def _state(clone: Clone) -> tuple[bytes, list[tuple[str, str, str]], int, int]:
    """postgresql.auto.conf, every setting with its source, the scratch schema count, the device's readahead."""
    async def settings() -> tuple[list[tuple[str, str, str]], int]:
        deadline = time.monotonic() + 120
        while True:  # a killed session may have left the clone mid-restart: its restart command goes on
            try:
                conn = await connect(clone.dsn)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        try:
            rows = await conn.fetch("SELECT name, setting, source FROM pg_settings ORDER BY name")
            scratch = await conn.fetchval("SELECT count(*) FROM pg_namespace WHERE nspname = 'tuner_scratch'")
        finally:
            await conn.close()
        return [tuple(r) for r in rows], int(scratch)  # type: ignore[misc]

    rows, scratch = clone.running.run(settings())
    auto = (clone.running.sandbox.primary_dir / "postgresql.auto.conf").read_bytes()
    return auto, rows, scratch, clone.disk.read_ahead_kb()


@pytest.fixture
def before(clone: Clone) -> tuple[bytes, list[tuple[str, str, str]], int, int]:
    clone.disk.set_read_ahead_kb(0)
    state = _state(clone)
    yield state
    clone.disk.set_read_ahead_kb(0)  # whatever happened, the device is put back for the next test


def _restore(clone: Clone, tmp_path: Path, state: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tuner", "restore", "--state-dir", str(state)], capture_output=True,
                          text=True, cwd=tmp_path, timeout=180, env=_env(clone, state))


def _family(name: str) -> Callable[[Event], bool]:
    return lambda e: e.get("event") == "plan" and e.get("family") == name


def _probe(kind: str, phase: str) -> Callable[[Event], bool]:
    def match(e: Event) -> bool:
        if e.get("event") != "probe" or e.get("phase") != phase:
            return False
        cfg = e.get("config") or {}
        if kind == "wal":
            return e.get("family") == "wal"
        if kind == "readahead":
            return "read_ahead_kb" in cfg
        return "effective_io_concurrency" in cfg and "read_ahead_kb" not in cfg
    return match


def _event(name: str) -> Callable[[Event], bool]:
    return lambda e: e.get("event") == name


# Ten distinct points across every family: planning, search, confirmation, a restart, a WAL load, between families.
STOP_POINTS: dict[str, tuple[list[str], Callable[[Event], bool], int]] = {
    "readahead-plan": (["readahead"], _family("readahead"), 1),
    "readahead-search": (["readahead"], _probe("readahead", "search"), 1),
    "readahead-search-later": (["readahead"], _probe("readahead", "search"), 3),
    "readahead-restart": (["readahead"], _event("restart"), 2),
    "concurrency-plan": (["concurrency"], _family("concurrency"), 1),
    "concurrency-search": (["concurrency"], _probe("concurrency", "search"), 2),
    "wal-plan": (["wal"], _family("wal"), 1),
    "wal-alter-system": (["wal"], lambda e: e.get("event") == "journal.record"
                         and str(e.get("name")).startswith("wal_"), 1),
    "wal-load": (["wal"], _probe("wal", "search"), 2),
    "between-families": (["readahead", "concurrency"], lambda e: e.get("event") == "family"
                         and e.get("family") == "readahead", 1),
}


@pytest.mark.parametrize("repeat", [1, 2])
@pytest.mark.parametrize("point", sorted(STOP_POINTS))
def test_a_stop_signal_at_any_point_ends_the_session_with_everything_put_back(
    clone: Clone, tmp_path: Path, before: Any, point: str, repeat: int,
) -> None:
    families, where, nth = STOP_POINTS[point]
    sig = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)[(repeat + sorted(STOP_POINTS).index(point)) % 3]
    run = Session(clone, tmp_path, families)
    run.wait_for(where, nth)
    took = run.stop(sig)
    assert run.proc.returncode == 128 + sig, run.text[-3000:]
    assert took < 30
    assert "Traceback" not in run.text and f"stopped by {signal.Signals(sig).name}" in run.text
    assert not (run.state / "journal.json").exists(), (run.state / "journal.json").read_text()
    assert _state(clone) == before


KILL_POINTS: dict[str, tuple[list[str], Callable[[Event], bool], int]] = {
    "during-a-readahead-probe": (["readahead"], _probe("readahead", "search"), 2),
    "during-alter-system-and-reload": (["wal"], lambda e: e.get("event") == "journal.record"
                                       and str(e.get("name")).startswith("wal_"), 1),
    "during-a-restart": (["readahead"], _event("restart"), 3),
    "during-the-wal-load": (["wal"], _probe("wal", "search"), 1),
    "during-confirmation": (["readahead"], _probe("readahead", "confirm"), 1),
    # The WAL family has put postgresql.auto.conf back and is reloading, dropping its scratch schema.
    "during-the-end-of-session-restore": (["wal"], lambda e: e.get("event") == "restored"
                                          and "postgresql.auto.conf" in str(e.get("detail")), 1),
}


@pytest.mark.parametrize("point", sorted(KILL_POINTS))
def test_sigkill_at_any_point_then_tuner_restore_puts_everything_back(
    clone: Clone, tmp_path: Path, before: Any, point: str,
) -> None:
    families, where, nth = KILL_POINTS[point]
    run = Session(clone, tmp_path, families)
    run.wait_for(where, nth)
    run.proc.send_signal(signal.SIGKILL)
    run.proc.wait(timeout=30)
    done = _restore(clone, tmp_path, run.state)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert not (run.state / "journal.json").exists()
    assert _state(clone) == before


def _during_a_query(clone: Clone, action: str) -> bool:
    """Wait (≤ 60 s) for one of tuner's probe queries to run on the clone, then terminate its backend (and for
    "restart", restart the server under the session too). True when it was done. (tuner restarts the clone before each probe, so each look is a
    connection of its own.)"""
    async def look() -> int | None:
        try:
            conn = await connect(clone.dsn, timeout_s=2)
        except Exception:
            return None
        try:
            pid = await conn.fetchval("SELECT pid FROM pg_stat_activity WHERE application_name = 'tuner' "
                                      "AND query LIKE 'EXPLAIN%' AND state = 'active' LIMIT 1")
            if pid is not None:
                # Ended from this connection at once: a restart alone takes a pg_ctl process's start-up to reach
                # the server, and on a loaded machine the probe's short query could end first (seen in CI: the
                # restart then fell between two probes and no probe failed).
                await conn.fetchval("SELECT pg_terminate_backend($1)", pid)
            return pid
        except Exception:
            return None
        finally:
            conn.terminate()

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if clone.running.run(look()) is not None:
            if action == "restart":
                # tuner restarts the server before its next probe, and may do so while this restart runs: one of
                # the two pg_ctl calls can then fail ("another server might be running"). What the test needs
                # is that the probe's connection died and that the server is up again afterwards.
                subprocess.run(clone.restart_command, shell=True, check=False, timeout=180, capture_output=True)
                _until_accepting(clone)
            return True
        time.sleep(0.02)
    return False


def _until_accepting(clone: Clone, timeout_s: float = 120) -> None:
    """Wait until the clone accepts connections (not "the database system is starting up")."""
    async def up() -> bool:
        try:
            conn = await connect(clone.dsn, timeout_s=2)
        except Exception:
            return False
        await conn.close()
        return True

    deadline = time.monotonic() + timeout_s
    while not clone.running.run(up()):
        if time.monotonic() > deadline:
            pg_ctl = str(clone.restart_command).replace(" restart", " start")
            subprocess.run(pg_ctl.replace("-m fast", ""), shell=True, check=False, timeout=180, capture_output=True)
            assert clone.running.run(up()), "the clone did not come back after the test's restart"
            return
        time.sleep(0.2)


def test_a_probe_whose_connection_dies_fails_and_the_session_goes_on(clone: Clone, tmp_path: Path, before: Any) -> None:
    run = Session(clone, tmp_path, ["concurrency"])
    run.wait_for(_probe("concurrency", "search"), 1)
    assert _during_a_query(clone, "terminate")
    run.wait_for(_probe("concurrency", "search"), 2)
    assert _during_a_query(clone, "restart")
    run.proc.wait(timeout=600)
    time.sleep(0.2)
    assert run.proc.returncode == 0, run.text[-3000:]
    doc = json.loads(run.stdout.read_text())
    failed = [t for t in doc["trials"] if t["status"] == "failed"]
    assert len(failed) >= 2, [(t["status"], t["reason"]) for t in doc["trials"]]
    assert doc["families"][0]["status"] == "done" and doc["recommendations"]
    assert _state(clone) == before


def test_a_statement_timeout_fails_each_probe_and_the_report_says_nothing_could_be_measured(
    clone: Clone, tmp_path: Path, before: Any,
) -> None:
    policy = tmp_path / "timeout.toml"
    policy.write_text(FAULTS.read_text() + "\n[guardrails]\nstatement_timeout_s = 0.001\nmax_failed_probes = 2\n")
    out = subprocess.run([sys.executable, "-m", "tuner", "recommend", "--dsn", clone.dsn, "--policy", str(policy),
                          "--family", "concurrency", "--format", "json"], capture_output=True, text=True,
                         cwd=tmp_path, timeout=600, env=_env(clone, tmp_path / "state"))
    assert out.returncode == 4, out.stderr[-2000:]
    doc = json.loads(out.stdout)
    assert [t["status"] for t in doc["trials"]] == ["failed", "failed"]
    assert all("statement timeout" in t["reason"] for t in doc["trials"])
    assert doc["families"][0]["status"] == "failed" and "2 probes in a row failed" in doc["families"][0]["reason"]
    assert "nothing could be measured" in out.stderr and "Traceback" not in out.stderr
    assert _state(clone) == before


def test_a_second_tuner_on_the_same_journal_is_refused_with_one_sentence(
    clone: Clone, tmp_path: Path, before: Any,
) -> None:
    (tmp_path / "one").mkdir()
    first = Session(clone, tmp_path / "one", ["readahead"])
    first.wait_for(_probe("readahead", "search"), 1)
    second = subprocess.run([sys.executable, "-m", "tuner", "recommend", "--dsn", clone.dsn, "--family", "readahead",
                             "--policy", str(FAULTS)], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                            env=_env(clone, first.state))
    assert second.returncode == 1, second.stderr
    assert second.stderr.startswith("tuner: error: ") and "another tuner" in second.stderr, second.stderr
    assert "Traceback" not in second.stderr and second.stdout == ""
    assert first.proc.poll() is None  # the first one goes on, its journal intact
    assert json.loads((first.state / "journal.json").read_text())["changes"]
    first.stop(signal.SIGTERM)
    assert first.proc.returncode == 143
    assert _state(clone) == before


def test_a_full_state_directory_means_no_change_without_its_record(clone: Clone, tmp_path: Path, before: Any) -> None:
    state = tmp_path / "state"
    state.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(state)], check=True)
    try:
        filler = state / "filler"
        with filler.open("wb") as fh, pytest.raises(OSError):
            fh.write(b"x" * 1024 * 1024)  # ENOSPC: nothing more fits
        out = subprocess.run([sys.executable, "-m", "tuner", "recommend", "--dsn", clone.dsn, "--family", "readahead",
                              "--policy", str(FAULTS), "--format", "json"], capture_output=True, text=True,
                             cwd=tmp_path, timeout=300, env=_env(clone, state))
        assert out.returncode != 0 and "Traceback" not in out.stderr
        assert "could not write the journal" in out.stderr, out.stderr[-2000:]
        probes = [json.loads(line) for line in out.stderr.splitlines() if line.startswith("{") and '"probe"' in line]
        assert all(p["config"].get("read_ahead_kb", 0) == 0 for p in probes if p.get("status") == "ok")
        assert clone.disk.read_ahead_kb() == 0
    finally:
        subprocess.run(["umount", str(state)], check=False)
    assert _state(clone) == before
