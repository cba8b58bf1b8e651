"""What the journal and its actuators share: the error they raise, and the account of one entry put back."""

from __future__ import annotations

from dataclasses import dataclass

from tuner.errors import TunerError


class JournalError(TunerError):
    """The journal could not be read, written or restored."""


@dataclass(frozen=True)
class Restored:
    """One entry put back (or dropped), for the user: what, from what, to what, and how."""

    object: str
    name: str
    was: str | None  # the value found before restoring
    restored_to: str
    action: str  # "restored", "already at the original value", "dropped: …"

    def sentence(self) -> str:
        if self.action == "restored":
            return f"{self.object}: {self.name} {self.was} -> {self.restored_to} (restored)"
        if self.action.startswith("dropped"):
            return f"{self.object}: {self.name} {self.action} (original {self.restored_to})"
        return f"{self.object}: {self.name} is {self.restored_to}, {self.action}"
