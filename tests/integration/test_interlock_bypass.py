"""Issue 44, item 2: the interlock cannot be argued with. Each bypass an attacker's review found, against a real
writable PostgreSQL 15 server of this test's own (no standby follows it: to tuner it is a primary unless its own
configuration file marks it):

- the server runs with ``-c tuner.role=production`` while a ``tuner.role = 'staging'`` line sits in postgresql.conf,
  and the DSN sets the marker with an option libpq and the server unescape (``tuner.r\\ole``);
- a staging line added to postgresql.conf but not reloaded;
- ``ALTER ROLE … SET "TUNER.ROLE"`` and a login role whose settings switch it to another role.

Every one is refused with exit 3 and no probe runs.
"""

from __future__ import annotations

from tests.unit.hostile import Input

import asyncio
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tuner.sandbox import Binaries

from .conftest import execute, tuner_env


@dataclass
class Bare:
    data: Path
    port: int
    pg_ctl: list[str]

    def dsn(self, user: str = "postgres", options: str | None = None) -> str:
        dsn = f"host={self.data} port={self.port} user={user} dbname=postgres"
        return dsn + (f" options='{options}'" if options else "")

    def psql(self, binaries: Binaries, sql: str) -> None:
        subprocess.run([*self._as, str(binaries.bin_dir / "psql"), "-X", "-v", "ON_ERROR_STOP=1", "-h", str(self.data),
                        "-p", str(self.port), "-U", "postgres", "-d", "postgres", "-c", sql],
                       check=True, capture_output=True, timeout=120)

    @property
    def _as(self) -> list[str]:
        return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _bare(base_dir: Path, pg15: Binaries, *, name: str, conf_line: str | None, argv_marker: str | None) -> Iterator[Bare]:
    """A writable server of this test's own, started with ``-c tuner.role=<argv_marker>`` if given and with
    ``conf_line`` in its postgresql.conf; stopped and removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix=f"bypass-{name}-", dir=base_dir))
    os.chmod(root, 0o755)
    data = root / "data"
    as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if os.geteuid() == 0:
        pw = pwd.getpwnam("postgres")
        os.chown(root, pw.pw_uid, pw.pw_gid)
    subprocess.run([*as_postgres, str(pg15.bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust",
                    "--no-sync", "-E", "UTF8"], check=True, capture_output=True, timeout=300)
    if conf_line:
        with (data / "postgresql.conf").open("a") as fh:
            fh.write(conf_line + "\n")
    port = _port()
    opts = f"-p {port} -k {data} -c listen_addresses=''"
    if argv_marker:
        opts += f" -c tuner.role={argv_marker}"
    pg_ctl = [*as_postgres, str(pg15.bin_dir / "pg_ctl"), "-D", str(data), "-l", str(root / "server.log"), "-w",
              "-t", "120"]
    subprocess.run([*pg_ctl, "-o", opts, "start"], check=True, capture_output=True, timeout=180)
    try:
        yield Bare(data, port, pg_ctl)
    finally:
        subprocess.run([*pg_ctl, "-m", "immediate", "stop"], capture_output=True, timeout=120)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def pinned(base_dir: Path, pg15: Binaries) -> Iterator[Bare]:
    """A primary whose operator pinned ``-c tuner.role=production``; postgresql.conf still has a staging line."""
    yield from _bare(base_dir, pg15, name="pinned", conf_line="tuner.role = 'staging'", argv_marker="production")


@pytest.fixture(scope="module")
def argv_marked(base_dir: Path, pg15: Binaries) -> Iterator[Bare]:
    """A primary started with ``-c tuner.role=staging`` (and the same line in postgresql.conf): the value in force
    is the command line's, which no configuration file controls."""
    yield from _bare(base_dir, pg15, name="argv", conf_line="tuner.role = 'staging'", argv_marker="staging")


@pytest.fixture(scope="module")
def plain(base_dir: Path, pg15: Binaries) -> Iterator[Bare]:
    """A primary with no marker anywhere (lines are added to it, never reloaded)."""
    yield from _bare(base_dir, pg15, name="plain", conf_line=None, argv_marker=None)


def _recommend(dsn: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tuner", "recommend", "--dsn", dsn, "--family", "concurrency",
                           "--budget", "3"], capture_output=True, text=True, cwd=tmp_path, timeout=300,
                          env=tuner_env(tmp_path / "state"))


def _refused(out: subprocess.CompletedProcess[str]) -> None:
    assert out.returncode == 3, (out.returncode, out.stderr[-3000:])
    assert "refusing to probe" in out.stderr and "Traceback" not in out.stderr, out.stderr[-3000:]
    assert "probe.done" not in out.stderr and out.stdout == ""


def test_a_pinned_primary_is_refused_whatever_an_escaped_option_says(pinned: Bare, tmp_path: Path) -> None:
    # libpq reads \\ as \ in a quoted value; the server then reads \o as o: tuner.role=staging for this session.
    _refused(_recommend(pinned.dsn(options="-c tuner.r\\\\ole=staging"), tmp_path))


def test_a_pinned_primary_is_refused_whatever_pgoptions_say(pinned: Bare, tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "tuner", "recommend", "--dsn", pinned.dsn(), "--family",
                          "concurrency", "--budget", "3"], capture_output=True, text=True, cwd=tmp_path, timeout=300,
                         env=tuner_env(tmp_path / "state", PGOPTIONS="--tuner.r\\ole=staging"))
    _refused(out)


def test_a_marker_on_the_servers_command_line_is_not_the_configuration_files(argv_marked: Bare,
                                                                             tmp_path: Path) -> None:
    out = _recommend(argv_marked.dsn(), tmp_path)
    _refused(out)
    assert "command line sets tuner.role" in out.stderr


def test_a_staging_line_added_but_not_reloaded_is_not_the_marker(plain: Bare, tmp_path: Path) -> None:
    conf = plain.data / "postgresql.conf"
    before = conf.read_text()
    try:
        with conf.open("a") as fh:
            fh.write("tuner.role = 'staging'\n")  # on disk (pg_file_settings shows it), never reloaded
        _refused(_recommend(plain.dsn(options="-c tuner.r\\\\ole=staging"), tmp_path))
    finally:
        conf.write_text(before)


ROLE_SETTINGS = {
    # ALTER ROLE … SET with the marker's name in upper case (GUC names are case-insensitive)
    "upper case": ("upper_case", ["CREATE ROLE upper_case LOGIN SUPERUSER",
                                  'ALTER ROLE upper_case SET "TUNER.ROLE" = \'staging\''], "DROP ROLE upper_case"),
    # a login role whose own settings carry the marker and switch it to another role at login (current_user is
    # then the other role; the login role's settings are session_user's)
    "role switched at login": ("switcher", [
        "CREATE ROLE switcher LOGIN SUPERUSER; CREATE ROLE switched SUPERUSER; GRANT switched TO switcher",
        "ALTER ROLE switcher SET tuner.role = 'staging'; ALTER ROLE switcher SET role = 'switched'"],
        "DROP ROLE switcher; DROP ROLE switched"),
}


@pytest.mark.parametrize("how", list(ROLE_SETTINGS))
def test_a_marker_in_the_login_roles_settings_is_refused(pinned: Bare, pg15: Binaries, tmp_path: Path,
                                                         how: str) -> None:
    user, setup, teardown = ROLE_SETTINGS[how]
    try:
        for sql in setup:
            pinned.psql(pg15, sql)
        out = _recommend(pinned.dsn(user=user), tmp_path)
        _refused(out)
        assert "ALTER DATABASE/ROLE" in out.stderr or "does not come from a configuration file" in out.stderr
    finally:
        pinned.psql(pg15, teardown)


# Issue 59, item 2: a marker the client sends through a connection service, whatever names the service, and a file
# whose modification time is older than the last reload while its content is not what the server loaded.

def _service_env(server: Bare, tmp_path: Path, **extra: str) -> dict[str, str]:
    """tuner's environment with a service file whose service ``stg`` reaches ``server`` and sets the marker."""
    services = tmp_path / "pg_service.conf"
    services.write_text(f"[stg]\nhost={server.data}\nport={server.port}\nuser=postgres\ndbname=postgres\n"
                        "options=-c tuner.role=staging\n")
    return tuner_env(tmp_path / "state", PGSERVICEFILE=str(services), **extra)


SERVICE_NAMED_BY = {  # how the service is named: extra arguments, extra environment
    "an empty --dsn and PGSERVICE": (["--dsn", ""], {"PGSERVICE": "stg"}),
    "PGSERVICE alone": ([], {"PGSERVICE": "stg"}),
    "PGHOST beside PGSERVICE": ([], {"PGSERVICE": "stg", "PGHOST": "/nonexistent"}),
    "an empty TUNER_TARGET__DSN": ([], {"PGSERVICE": "stg", "TUNER_TARGET__DSN": ""}),
    "the DSN's service": (["--dsn", "service=stg"], {}),
}


def _backdate(*paths: Path) -> None:
    for path in paths:
        os.utime(path, (946684800, 946684800))  # 2000-01-01: older than any load of this server's configuration


@pytest.mark.parametrize("how", list(SERVICE_NAMED_BY))
def test_a_marker_a_connection_service_sends_is_the_clients(plain: Bare, tmp_path: Path, how: str) -> None:
    conf = plain.data / "postgresql.conf"
    auto = (plain.data / "postgresql.auto.conf").read_text()
    before = conf.read_text()
    args, extra = SERVICE_NAMED_BY[how]
    try:
        with conf.open("a") as fh:
            fh.write("tuner.role = 'staging'\n")  # on disk, never reloaded, its time older than the last load
        _backdate(conf)
        out = subprocess.run([sys.executable, "-m", "tuner", "recommend", *args, "--family", "wal", "--budget", "3"],
                             capture_output=True, text=True, cwd=tmp_path, timeout=300,
                             env=_service_env(plain, tmp_path, **extra))
        _refused(out)
        assert "set by this connection's own options" in out.stderr, out.stderr[-2000:]
        assert (plain.data / "postgresql.auto.conf").read_text() == auto  # no ALTER SYSTEM, no reload of the file
    finally:
        conf.write_text(before)


def test_alter_systems_marker_moved_into_a_file_unreloaded_is_not_the_files(plain: Bare, pg15: Binaries,
                                                                           tmp_path: Path) -> None:
    """The marker in force came from ALTER SYSTEM; it was reset and a line put into postgresql.conf, neither
    reloaded, and both files carry times older than the last load. What the server reports it loaded
    (pg_settings' file and line for work_mem, set after the marker in postgresql.auto.conf) is not what the files
    say now."""
    conf = plain.data / "postgresql.conf"
    before = conf.read_text()
    try:
        # (ALTER SYSTEM takes a placeholder only once the session knows it: SET first, in the same session.)
        asyncio.run(execute(plain.dsn(), "SET tuner.role = 'x'", "ALTER SYSTEM SET tuner.role = 'staging'",
                            "ALTER SYSTEM SET work_mem = '8MB'", "SELECT pg_reload_conf()"))
        # (rewrites postgresql.auto.conf, not reloaded)
        asyncio.run(execute(plain.dsn(), "SET tuner.role = 'x'", "ALTER SYSTEM RESET tuner.role"))
        with conf.open("a") as fh:
            fh.write("tuner.role = 'staging'\n")
        _backdate(conf, plain.data / "postgresql.auto.conf")
        out = _recommend(plain.dsn(), tmp_path)
        _refused(out)
        assert "configuration files changed since it last loaded them: work_mem was loaded from " in out.stderr
        assert "postgresql.auto.conf:4, and is set at " in out.stderr and "postgresql.auto.conf:3 now" in out.stderr
    finally:
        conf.write_text(before)
        plain.psql(pg15, "ALTER SYSTEM RESET ALL")
        plain.psql(pg15, "SELECT pg_reload_conf()")


@pytest.fixture(scope="module")
def included_auto_conf(base_dir: Path, pg15: Binaries) -> Iterator[Bare]:
    """A writable server whose marker is in an included file named postgresql.auto.conf in another directory."""
    conf_dir = Path(tempfile.mkdtemp(prefix="bypass-include-", dir=base_dir))
    os.chmod(conf_dir, 0o755)
    included = conf_dir / "postgresql.auto.conf"
    included.write_text("tuner.role = 'staging'\n")
    os.chmod(included, 0o644)
    try:
        yield from _bare(base_dir, pg15, name="included", conf_line=f"include '{included}'", argv_marker=None)
    finally:
        shutil.rmtree(conf_dir, ignore_errors=True)


def test_a_marker_in_an_included_file_named_like_alter_systems_says_so(included_auto_conf: Bare,
                                                                      tmp_path: Path) -> None:
    out = _recommend(included_auto_conf.dsn(), tmp_path)
    _refused(out)
    assert "ALTER SYSTEM (postgresql.auto.conf)" not in out.stderr, out.stderr[-2000:]
    assert "bypass-include-" in out.stderr and "postgresql.auto.conf:1, an included file named like the one " \
        "ALTER SYSTEM writes but outside the data directory" in out.stderr, out.stderr[-2000:]


# The hostile-input suite's registry (tests/unit/hostile.py): issue 59 item 2's inputs, counted once each.
INPUTS = [
    *[Input(f"service-marker-{how.replace(' ', '-')}", "connection service",
            f"pg_service.conf [stg] options=-c tuner.role=staging, named by {how}; postgresql.conf holds an "
            "unreloaded marker line older than the last load", frozenset({"59.2"})) for how in SERVICE_NAMED_BY],
    Input("marker-moved-from-alter-system-unreloaded", "configuration file",
          "ALTER SYSTEM's marker reset and a postgresql.conf line added, neither reloaded, both files backdated",
          frozenset({"59.2"})),
    Input("marker-in-included-postgresql-auto-conf", "configuration file",
          "include 'bypass-include-*/postgresql.auto.conf' holding tuner.role = 'staging'"),
]
