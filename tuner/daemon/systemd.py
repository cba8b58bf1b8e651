"""sd_notify(3) without libsystemd: one datagram to ``$NOTIFY_SOCKET`` per state change, as Patroni does.

Used by the service at each stage: :meth:`Notifier.ready` once it serves (and again after each reload),
:meth:`Notifier.reloading` on SIGHUP, :meth:`Notifier.stopping` on SIGTERM, :meth:`Notifier.status` for what it
is doing, :meth:`Notifier.watchdog` every :attr:`Notifier.watchdog_interval_s` seconds.

Outside systemd (no ``NOTIFY_SOCKET``) every method is a silent no-op. A send that fails is logged once and never
raises: a lost notification must not stop the daemon (systemd's own timeouts deal with it).

The variables are removed from the process environment once read (``unset_environment``, as sd_notify's flag of
that name does): the programs the daemon starts — ``restart_command``, ``pg_ctl``, a PostgreSQL built with
systemd support — must not report to tuner's unit as if they were tuner.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, MutableMapping

from tuner.log import get_logger

log = get_logger("tuner.daemon.systemd")

_ENV = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")
STATUS_MAX_CHARS = 1000  # systemd drops notifications longer than a pipe buffer (4 KiB)
SEND_TIMEOUT_S = 1.0  # a datagram socket blocks only when systemd's queue is full; do not hang the daemon on it


def monotonic_us() -> int:
    """CLOCK_MONOTONIC in microseconds: the clock systemd compares ``MONOTONIC_USEC=`` with."""
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000


class Notifier:
    """Reports the daemon's state to systemd (``Type=notify``) and pings its watchdog.

    ``environ`` defaults to ``os.environ``; ``NOTIFY_SOCKET`` is a file system path or an abstract socket
    (``@name``). The watchdog follows sd_watchdog_enabled(3): enabled when ``WATCHDOG_USEC`` is a positive
    integer and ``WATCHDOG_PID``, when set, is this process. Create one Notifier per process, at start: with
    ``unset_environment`` (the default) it removes the three variables from ``environ``.
    """

    def __init__(
        self,
        environ: MutableMapping[str, str] | None = None,
        *,
        unset_environment: bool = True,
        pid: int | None = None,
        clock_us: Callable[[], int] = monotonic_us,
    ) -> None:
        env = os.environ if environ is None else environ
        values = {name: env.get(name) for name in _ENV}
        if unset_environment:
            for name in _ENV:
                env.pop(name, None)
        self._clock_us = clock_us
        self._warned = False
        self.socket_name = values["NOTIFY_SOCKET"] or None
        self._address = self._parse_socket(self.socket_name)
        self._watchdog_usec = self._parse_watchdog(
            values["WATCHDOG_USEC"], values["WATCHDOG_PID"], os.getpid() if pid is None else pid
        )

    @property
    def enabled(self) -> bool:
        """Whether there is a systemd to tell (``NOTIFY_SOCKET`` was set to an address tuner can use)."""
        return self._address is not None

    @property
    def watchdog_interval_s(self) -> float | None:
        """How often to call :meth:`watchdog`, in seconds: half of ``WATCHDOG_USEC``, as sd_watchdog_enabled(3)
        advises; None when systemd expects no pings from this process."""
        if self._watchdog_usec is None or self._address is None:
            return None
        return self._watchdog_usec / 2 / 1e6

    def ready(self, status: str | None = None) -> None:
        """Start-up (or a reload) is complete: ``READY=1``."""
        self._send("READY=1", status=status)

    def reloading(self, status: str | None = None) -> None:
        """A reload began: ``RELOADING=1`` with ``MONOTONIC_USEC=`` (which systemd 253+ wants for
        ``Type=notify-reload``). Call :meth:`ready` when it is done, also when it failed and the old
        configuration stays."""
        self._send("RELOADING=1", f"MONOTONIC_USEC={self._clock_us()}", status=status)

    def stopping(self, status: str | None = None) -> None:
        """Shutdown began: ``STOPPING=1``."""
        self._send("STOPPING=1", status=status)

    def status(self, text: str) -> None:
        """A one-line status for ``systemctl status``: ``STATUS=``."""
        self._send(status=text)

    def watchdog(self) -> None:
        """Ping the watchdog (``WATCHDOG=1``); nothing when the watchdog is not enabled for this process."""
        if self._watchdog_usec is not None:
            self._send("WATCHDOG=1")

    def extend_timeout(self, seconds: float) -> None:
        """Ask for ``seconds`` more before systemd gives up on a start, reload or stop in progress
        (``EXTEND_TIMEOUT_USEC=``), e.g. while a start-up restores the journal and restarts PostgreSQL."""
        self._send(f"EXTEND_TIMEOUT_USEC={max(0, round(seconds * 1e6))}")

    # -- internals -----------------------------------------------------------------------------------

    @staticmethod
    def _parse_socket(name: str | None) -> str | None:
        if name is None:
            return None
        if name.startswith("@") and len(name) > 1:
            return "\0" + name[1:]  # Linux abstract namespace
        if name.startswith("/"):
            return name
        log.warning("NOTIFY_SOCKET is neither a path nor an abstract socket; systemd will not hear from tuner",
                    socket=name)
        return None

    @staticmethod
    def _parse_watchdog(usec: str | None, pid: str | None, own_pid: int) -> int | None:
        if usec is None:
            return None
        try:
            value = int(usec)
            owner = int(pid) if pid is not None else own_pid
        except ValueError:
            log.warning("WATCHDOG_USEC or WATCHDOG_PID is not a number; the watchdog is not pinged",
                        watchdog_usec=usec, watchdog_pid=pid)
            return None
        if value <= 0 or owner != own_pid:  # not for this process (a parent's watchdog): leave it alone
            return None
        return value

    def _send(self, *assignments: str, status: str | None = None) -> None:
        if self._address is None:
            return
        fields = list(assignments)
        if status is not None:
            one_line = status.replace("\r", " ").replace("\n", " ")  # a newline would start another field
            fields.append(f"STATUS={one_line[:STATUS_MAX_CHARS]}")
        data = "\n".join(fields).encode(errors="replace")
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
                sock.settimeout(SEND_TIMEOUT_S)
                sock.sendto(data, self._address)
        except OSError as exc:
            if not self._warned:  # once: a socket that is gone stays gone, and the watchdog pings every few seconds
                self._warned = True
                log.warning("could not notify systemd; the unit may time out or be restarted by its watchdog",
                            socket=self.socket_name, error=exc.strerror or str(exc), message=data.decode())
