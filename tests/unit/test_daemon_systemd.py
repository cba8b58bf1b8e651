"""sd_notify as systemd receives it: the exact datagrams on a real AF_UNIX socket (a path and an abstract name),
the watchdog rules of sd_watchdog_enabled(3), and silence — never an exception — when there is no systemd."""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from tuner.daemon.systemd import Notifier, monotonic_us


@pytest.fixture
def listener(tmp_path: Path) -> Iterator[tuple[socket.socket, str]]:
    """A datagram socket bound in a temporary directory, as systemd's notify socket is, and its NOTIFY_SOCKET."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    path = tmp_path / "notify"
    sock.bind(str(path))
    sock.settimeout(30)  # generous: the datagram is already queued when recv runs
    yield sock, str(path)
    sock.close()


@pytest.fixture
def abstract_listener() -> Iterator[tuple[socket.socket, str]]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    name = f"tuner-test-{uuid.uuid4().hex}"
    sock.bind("\0" + name)
    sock.settimeout(30)
    yield sock, "@" + name
    sock.close()


def nothing_more(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        sock.recv(4096)
    except BlockingIOError:
        return True
    return False


def test_each_state_is_one_datagram_with_exactly_these_fields(listener: tuple[socket.socket, str]) -> None:
    sock, address = listener
    n = Notifier({"NOTIFY_SOCKET": address}, clock_us=lambda: 123456789)
    n.ready("serving on :8080")
    n.status("session 4 of 5: readahead")
    n.reloading("reloading /etc/tuner/tuner.toml")
    n.ready()
    n.stopping("putting back read_ahead_kb of vda")
    n.extend_timeout(90)
    assert [sock.recv(4096) for _ in range(6)] == [
        b"READY=1\nSTATUS=serving on :8080",
        b"STATUS=session 4 of 5: readahead",
        b"RELOADING=1\nMONOTONIC_USEC=123456789\nSTATUS=reloading /etc/tuner/tuner.toml",
        b"READY=1",
        b"STOPPING=1\nSTATUS=putting back read_ahead_kb of vda",
        b"EXTEND_TIMEOUT_USEC=90000000",
    ]
    assert nothing_more(sock)


def test_an_abstract_socket_is_reached_by_its_at_name(abstract_listener: tuple[socket.socket, str]) -> None:
    sock, address = abstract_listener
    n = Notifier({"NOTIFY_SOCKET": address})
    assert n.enabled
    n.ready("up")
    assert sock.recv(4096) == b"READY=1\nSTATUS=up"


def test_reloading_carries_the_monotonic_clock_systemd_compares_with(listener: tuple[socket.socket, str]) -> None:
    sock, address = listener
    before = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
    Notifier({"NOTIFY_SOCKET": address}).reloading()
    after = monotonic_us()
    first, second = sock.recv(4096).decode().split("\n")
    assert first == "RELOADING=1"
    key, value = second.split("=")
    assert key == "MONOTONIC_USEC" and before <= int(value) <= after


def test_a_status_cannot_smuggle_in_another_field(listener: tuple[socket.socket, str]) -> None:
    sock, address = listener
    n = Notifier({"NOTIFY_SOCKET": address})
    n.status("could not connect:\nREADY=1\r\nWATCHDOG=trigger")
    assert sock.recv(4096) == b"STATUS=could not connect: READY=1  WATCHDOG=trigger"
    n.status("x" * 10000)
    assert len(sock.recv(65536)) == len("STATUS=") + 1000


def test_the_watchdog_interval_is_half_of_watchdog_usec(listener: tuple[socket.socket, str]) -> None:
    sock, address = listener
    n = Notifier({"NOTIFY_SOCKET": address, "WATCHDOG_USEC": "120000000"})
    assert n.watchdog_interval_s == 60.0
    n.watchdog()
    assert sock.recv(4096) == b"WATCHDOG=1"


@pytest.mark.parametrize(("env", "interval"), [
    ({"WATCHDOG_USEC": "4000000", "WATCHDOG_PID": str(os.getpid())}, 2.0),  # for this process
    ({"WATCHDOG_USEC": "4000000", "WATCHDOG_PID": "1"}, None),  # another process's watchdog
    ({"WATCHDOG_USEC": "4000000", "WATCHDOG_PID": "x"}, None),
    ({"WATCHDOG_USEC": "0"}, None),
    ({"WATCHDOG_USEC": "-5"}, None),
    ({"WATCHDOG_USEC": "soon"}, None),
    ({}, None),
])
def test_the_watchdog_follows_sd_watchdog_enabled(
    listener: tuple[socket.socket, str], env: dict[str, str], interval: float | None
) -> None:
    sock, address = listener
    n = Notifier({"NOTIFY_SOCKET": address, **env})
    assert n.watchdog_interval_s == interval
    n.watchdog()  # sends only when the watchdog is this process's
    n.status("marker")
    expected = [b"WATCHDOG=1", b"STATUS=marker"] if interval else [b"STATUS=marker"]
    assert [sock.recv(4096) for _ in expected] == expected


def test_the_watchdog_pid_is_compared_with_the_given_pid() -> None:
    env = {"NOTIFY_SOCKET": "@x", "WATCHDOG_USEC": "1000000", "WATCHDOG_PID": "4242"}
    assert Notifier(dict(env), pid=4242).watchdog_interval_s == 0.5
    assert Notifier(dict(env), pid=4243).watchdog_interval_s is None


def test_without_notify_socket_everything_is_a_silent_no_op() -> None:
    with capture_logs() as logs:
        n = Notifier({"WATCHDOG_USEC": "1000000"})
        n.ready("up")
        n.reloading()
        n.stopping()
        n.status("x")
        n.watchdog()
        n.extend_timeout(10)
    assert not n.enabled and n.watchdog_interval_s is None
    assert logs == []


def test_the_variables_leave_the_environment_so_child_programs_do_not_report(
    listener: tuple[socket.socket, str]
) -> None:
    sock, address = listener
    env = {"NOTIFY_SOCKET": address, "WATCHDOG_USEC": "1000000", "WATCHDOG_PID": str(os.getpid()), "PGHOST": "x"}
    n = Notifier(env)
    assert env == {"PGHOST": "x"}
    n.ready()  # still reports: it read them first
    assert sock.recv(4096) == b"READY=1"
    kept = {"NOTIFY_SOCKET": address}
    Notifier(kept, unset_environment=False)
    assert kept == {"NOTIFY_SOCKET": address}


def test_the_default_environment_is_the_process_environment(
    listener: tuple[socket.socket, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    sock, address = listener
    monkeypatch.setenv("NOTIFY_SOCKET", address)
    n = Notifier()
    assert "NOTIFY_SOCKET" not in os.environ
    n.ready()
    assert sock.recv(4096) == b"READY=1"


def test_a_failing_send_is_logged_once_and_never_raises(tmp_path: Path) -> None:
    n = Notifier({"NOTIFY_SOCKET": str(tmp_path / "gone"), "WATCHDOG_USEC": "1000000"})
    with capture_logs() as logs:
        n.ready("up")
        for _ in range(5):
            n.watchdog()
        n.stopping()
    assert len(logs) == 1
    assert logs[0]["log_level"] == "warning" and logs[0]["socket"] == str(tmp_path / "gone")
    assert "No such file" in logs[0]["error"] and logs[0]["message"] == "READY=1\nSTATUS=up"


def test_a_socket_systemd_closed_after_start_is_logged_once(listener: tuple[socket.socket, str]) -> None:
    sock, address = listener
    n = Notifier({"NOTIFY_SOCKET": address})
    n.ready()
    assert sock.recv(4096) == b"READY=1"
    sock.close()
    os.unlink(address)
    with capture_logs() as logs:
        n.status("a")
        n.status("b")
    assert [e["event"] for e in logs] == [
        "could not notify systemd; the unit may time out or be restarted by its watchdog"
    ]


@pytest.mark.parametrize("value", ["relative/path", "vsock:2:1234", "@"])
def test_an_address_tuner_cannot_use_is_logged_and_ignored(value: str) -> None:
    with capture_logs() as logs:
        n = Notifier({"NOTIFY_SOCKET": value})
        n.ready()
    assert not n.enabled
    assert [(e["event"], e["socket"]) for e in logs] == [
        ("NOTIFY_SOCKET is neither a path nor an abstract socket; systemd will not hear from tuner", value)
    ]
