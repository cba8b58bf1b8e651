"""Renderers: one report, many formats, each rendered at output time from the report's data.

An emitter has a ``name``, says whether ``--format NAME`` may print it (``stdout``), and ``render(report)``
returns its files (name → text; the first is what ``--format`` prints). A new format is one module with such a
class plus one line in :data:`EMITTERS`.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Protocol

from tuner.emit.host import Host
from tuner.emit.html import HtmlReport
from tuner.emit.json import JsonReport
from tuner.emit.sql import Sql
from tuner.emit.table import TableReport
from tuner.files import atomic_write
from tuner.model import Report


class Emitter(Protocol):
    name: ClassVar[str]
    stdout: ClassVar[bool]

    def render(self, report: Report) -> dict[str, str]: ...


EMITTERS: dict[str, Emitter] = {e.name: e for e in (TableReport(), JsonReport(), Sql(), Host(), HtmlReport())}
FORMATS: tuple[str, ...] = tuple(name for name, e in EMITTERS.items() if e.stdout)


def text(report: Report, fmt: str) -> str:
    """What ``--format fmt`` prints on stdout."""
    return next(iter(EMITTERS[fmt].render(report).values()))


def write_outputs(report: Report, directory: Path) -> list[Path]:
    """Every emitter's files into ``directory``, each written atomically."""
    written = []
    for emitter in EMITTERS.values():
        for name, body in emitter.render(report).items():
            atomic_write(directory / name, body)
            written.append(directory / name)
    return written
