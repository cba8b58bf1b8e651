"""What the journal and its actuators share: the errors they raise, and the account of one entry put back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tuner.errors import RefusedError, TunerError


class JournalError(TunerError):
    """The journal could not be read, written or restored, or another tuner holds it (exit 1)."""


class JournalInvalid(JournalError):
    """The journal on disk is damaged or was not written by tuner: bad input, nothing was written (exit 2)."""

    exit_code = 2


NOT_SET = "(not set)"


@dataclass(frozen=True)
class Restored:
    """One entry put back (or dropped, or not put back), for the user: what, from what, to what, and how."""

    object: str
    name: str
    was: str | None  # the value found before restoring
    restored_to: str
    action: str  # "restored", "already at the original value", "dropped: …", "failed", "refused"
    reason: str | None = None  # why it failed or was refused; the entry stays in the journal

    @property
    def ok(self) -> bool:
        """False when the entry could not be put back (it stays in the journal for ``tuner restore``)."""
        return self.action not in ("failed", "refused")

    def sentence(self) -> str:
        if self.action == "restored":
            return f"{self.object}: {self.name} {self.was} -> {self.restored_to} (restored)"
        if self.action.startswith("dropped"):
            return f"{self.object}: {self.name} {self.action} (original {self.restored_to})"
        if not self.ok:
            return (f"{self.object}: {self.name} NOT put back to {self.restored_to} ({self.action}: {self.reason}); "
                    "the journal keeps it")
        return f"{self.object}: {self.name} is {self.restored_to}, {self.action}"


def not_restored(change: dict[str, Any], exc: Exception) -> Restored:
    """The account of an entry that ``exc`` kept from being put back: "refused" by the interlock, else "failed"."""
    if isinstance(exc, TunerError):
        reason = str(exc)
    elif isinstance(exc, OSError) and exc.filename and exc.strerror:
        reason = f"{exc.filename}: {exc.strerror}"
    else:
        reason = f"{type(exc).__name__}: {exc}"
    original = change.get("original")
    return Restored(str(change.get("device") or change.get("path") or "?"), str(change.get("name")), None,
                    NOT_SET if original is None else str(original),
                    "refused" if isinstance(exc, RefusedError) else "failed", reason)
