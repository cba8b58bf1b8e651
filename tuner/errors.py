"""One error root, a few meaningful children.

Each user-facing error carries one sentence (``str(err)``) and an optional hint. The command line prints
both and exits with the class's ``exit_code``; it never prints a traceback for a :class:`TunerError`.
"""

from __future__ import annotations


class TunerError(Exception):
    """Root of every error tuner raises on purpose."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


class ConfigError(TunerError):
    """The configuration, a policy or a command-line value is wrong (exit 2)."""

    exit_code = 2


class RefusedError(TunerError):
    """The safety interlock refused the target (exit 3). Nothing on the target was changed."""

    exit_code = 3


class RoleChangedError(RefusedError):
    """The server stopped being what the interlock cleared (promoted, unmarked, another server answered): the
    session stops, puts back what it can without writing to that server, and exits 3."""


class TargetError(TunerError):
    """The target could not be reached or did not behave as a PostgreSQL server must (exit 1)."""


class NoServerOfKind(TargetError):
    """A connection asked for a kind of server (``target_session_attrs``) and none of the DSN's hosts is one."""


class SandboxError(TunerError):
    """The throwaway sandbox cluster could not be created or run (exit 1)."""


class ProbeError(TunerError):
    """A probe failed in a way that is recorded as a failed trial, not as a number."""


class DaemonError(TunerError):
    """A request the daemon cannot do (HTTP 400; ``status`` for another code)."""

    def __init__(self, message: str, *, hint: str | None = None, status: int = 400) -> None:
        super().__init__(message, hint=hint)
        self.http_status = status


class StoreError(TunerError):
    """The store cannot be used: damaged, of a newer schema, unreachable, or a write failed (exit 2)."""

    exit_code = 2
