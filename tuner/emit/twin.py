"""The apply/rollback render base of the config-management formats (conf, ansible, patroni, cnpg, zalando, udev,
tuned): each file a format writes is rendered twice from the same report, once to apply its changes and once —
the same name under ``rollback/`` — to put back today's values.

At the bottom of :mod:`tuner.emit` (it imports only the model), so that :mod:`tuner.emit.sql`, which the shared
helpers in :mod:`tuner.emit.changes` build on, can name a recommendation the same way they do.
"""

from __future__ import annotations

from typing import ClassVar, Protocol

from tuner.report.model import Recommendation, Report

ROLLBACK_DIR = "rollback/"


class Part(Protocol):
    """Renders one file of a format: to apply the report's changes, or (``rollback=True``) to take them back."""

    def __call__(self, report: Report, *, rollback: bool = False) -> str: ...


class ApplyRollback:
    """A format whose every file has a rollback twin. A subclass sets ``name`` and ``parts`` — (file name,
    renderer) pairs in the order ``--format`` shows them; the first is what it prints. :meth:`render` returns the
    apply files in that order, then their twins under ``rollback/``. These formats are written by ``tuner export``
    only (``export_only``)."""

    name: ClassVar[str]
    parts: ClassVar[tuple[tuple[str, Part], ...]]
    stdout: ClassVar[bool] = True
    export_only: ClassVar[bool] = True

    def render(self, report: Report) -> dict[str, str]:
        return {(ROLLBACK_DIR if rollback else "") + name: part(report, rollback=rollback)
                for rollback in (False, True) for name, part in self.parts}


def label(rec: Recommendation) -> str:
    """How the formats name what a recommendation changes: the setting, and its tablespace or device."""
    if rec.scope == "tablespace":
        return f"{rec.knob} of tablespace {rec.object}"
    if rec.scope == "device":
        return f"{rec.knob} of {rec.object}"
    return rec.knob


def file_text(lines: list[str]) -> str:
    """A file of ``lines``, ending in exactly one newline."""
    return "\n".join(lines).rstrip("\n") + "\n"
