"""The interlock against a real server: a marker that could also clear a primary is refused, and a standby promoted
in the middle of a session stops it (exit 3) before anything is written to the new primary."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tuner.target.connection import connect
from tuner.sandbox import Binaries, Sandbox

from .conftest import Running, execute, tuner_env

FAULTS = Path(__file__).parent.parent / "fixtures" / "policies" / "good" / "faults.toml"


_env = tuner_env


def _recommend(dsn: str, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tuner", "recommend", "--dsn", dsn, "--family", "concurrency",
                           "--budget", "3", *extra], capture_output=True, text=True, cwd=tmp_path, timeout=300,
                          env=_env(tmp_path / "state"))


@pytest.fixture(scope="module")
def faked(sandbox15: Running) -> Iterator[str]:
    """A database on the (unmarked) primary whose own settings carry the marker: ALTER DATABASE … SET, which
    replicates to every standby and would clear the primary too. Removed afterwards (other tests share the server)."""
    primary = sandbox15.sandbox.dsn("primary")

    sandbox15.run(execute(primary, "CREATE DATABASE faked", "ALTER DATABASE faked SET tuner.role = 'staging'",
                          "ALTER ROLE postgres IN DATABASE faked SET tuner.role = 'staging'"))
    yield primary.replace("@/postgres?", "@/faked?")
    sandbox15.run(execute(primary, "ALTER ROLE postgres IN DATABASE faked RESET tuner.role", "DROP DATABASE faked"))


@pytest.mark.parametrize("how", ["alter database", "options", "uri parameter", "uri parameter, percent-encoded"])
def test_a_primary_with_a_marker_from_outside_its_configuration_files_is_refused(
    sandbox15: Running, faked: str, tmp_path: Path, how: str,
) -> None:
    primary = sandbox15.sandbox.dsn("primary")
    assert "@/faked?" in faked
    dsn = {"alter database": faked, "options": primary + "&options=-c%20tuner.role%3Dstaging",
           "uri parameter": primary + "&tuner.role=staging",
           "uri parameter, percent-encoded": primary + "&tun%65r.role=staging"}[how]
    out = _recommend(dsn, tmp_path)
    assert "Traceback" not in out.stderr and out.stdout == ""
    if how.startswith("uri parameter"):
        # A URI cannot carry a setting at all: refused as bad input before any connection.
        assert out.returncode == 2 and "invalid URI query parameter" in out.stderr, out.stderr[-2000:]
        return
    assert out.returncode == 3, (out.returncode, out.stderr[-2000:])
    why = "ALTER DATABASE/ROLE" if how == "alter database" else "this connection's own options"
    assert why in out.stderr


def test_a_standby_promoted_mid_session_stops_it_and_is_not_restarted(
    base_dir: Path, pg15: Binaries, tmp_path: Path,
) -> None:
    r = Running(Sandbox(base_dir=base_dir, scale=1, binaries=pg15))
    r.run(r.sandbox.__aenter__())
    try:
        sb = r.sandbox
        pg_ctl = sb.binaries.bin_dir / "pg_ctl"
        as_postgres = "runuser -u postgres -- " if os.geteuid() == 0 else ""
        # The staging server's restart command; on its second use it also promotes the standby afterwards, as a
        # failover would between two probes.
        script = tmp_path / "restart.sh"
        script.write_text(
            "#!/bin/sh\nset -e\n"
            f"n=$(cat {tmp_path}/count 2>/dev/null || echo 0); n=$((n + 1)); echo $n > {tmp_path}/count\n"
            f"{as_postgres}{pg_ctl} -D {sb.standby_dir} -l {sb.standby_dir / 'server.log'} -w -t 120 -m fast restart\n"
            f"if [ $n -eq 2 ]; then {as_postgres}{pg_ctl} -D {sb.standby_dir} -w promote; "
            f"date +%s.%N > {tmp_path}/promoted; fi\n")
        script.chmod(0o755)
        out = subprocess.run(
            [sys.executable, "-m", "tuner", "recommend", "--dsn", sb.dsn("standby"), "--family", "concurrency",
             "--policy", str(FAULTS), "--format", "json"], capture_output=True, text=True, cwd=tmp_path, timeout=300,
            env=_env(tmp_path / "state", TUNER_TARGET__RESTART_COMMAND=str(script)))
        assert out.returncode == 3, out.stderr[-3000:]
        assert "no longer a hot standby" in out.stderr and "Traceback" not in out.stderr, out.stderr[-3000:]
        assert (tmp_path / "count").read_text().strip() == "2"  # no restart after the promotion

        async def started() -> tuple[bool, float]:
            conn = await connect(sb.dsn("standby"))
            try:
                row = await conn.fetchrow("SELECT pg_is_in_recovery() AS r, "
                                          "extract(epoch FROM pg_postmaster_start_time()) AS t")
                return bool(row["r"]), float(row["t"])
            finally:
                await conn.close()

        in_recovery, start = r.run(started())
        assert not in_recovery and start < float((tmp_path / "promoted").read_text())
        events = [json.loads(line)["event"] for line in out.stderr.splitlines() if line.startswith("{")]
        assert events.count("interlock.changed") == 1
    finally:
        r.run(r.sandbox.__aexit__(None, None, None))
        r.loop.close()
