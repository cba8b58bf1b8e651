"""Renderers: one report, many formats, each rendered at output time from the report's data.

An emitter has a ``name``, says whether ``--format NAME`` may print it (``stdout``), and ``render(report)``
returns its files (name → text; the first is what ``--format`` prints). A new format is one module with such a
class plus one line in :data:`EMITTERS`.

Two optional class attributes: ``export_only = True`` keeps a format's files out of ``--output`` of recommend and
show (the config-management formats: ``tuner export --format NAME --output DIR`` writes them); ``wants_history =
True`` makes :func:`render` pass ``history=`` — the stored sessions of the report's target, newest first.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from tuner.emit.ansible import Ansible
from tuner.emit.cnpg import Cnpg
from tuner.emit.conf import Conf
from tuner.emit.host import Host
from tuner.emit.html import HtmlReport
from tuner.emit.json import JsonReport
from tuner.emit.patroni import Patroni
from tuner.emit.sql import Sql
from tuner.emit.table import TableReport
from tuner.emit.terminal import Terminal
from tuner.emit.tuned import Tuned
from tuner.emit.udev import Udev
from tuner.emit.zalando import Zalando
from tuner.fs.atomic import write_files
from tuner.report.model import Report
from tuner.report.validate import check

if TYPE_CHECKING:
    from tuner.store import SessionSummary


class Emitter(Protocol):
    name: ClassVar[str]
    stdout: ClassVar[bool]

    def render(self, report: Report) -> dict[str, str]: ...


EMITTERS: dict[str, Emitter] = {e.name: e for e in (
    TableReport(), JsonReport(), Sql(), Host(), HtmlReport(),
    Conf(), Ansible(), Patroni(), Cnpg(), Zalando(), Udev(), Tuned(),
)}
FORMATS: tuple[str, ...] = tuple(name for name, e in EMITTERS.items() if e.stdout)


def render(report: Report, fmt: str, *, history: list[SessionSummary] | None = None) -> dict[str, str]:
    """Format ``fmt``'s files (name → text, the main one first). ``history`` — the stored sessions of the report's
    target, newest first, or None when there is none to give (a report read from a file) — goes to an emitter
    whose class says ``wants_history = True``. A report tuner could not have written is refused first
    (:func:`tuner.report.validate.check`: one :class:`~tuner.report.validate.ReportError` sentence, nothing rendered)."""
    check(report)
    emitter: Any = EMITTERS[fmt]
    if getattr(type(emitter), "wants_history", False):
        return dict(emitter.render(report, history=history))
    return dict(emitter.render(report))


def text(report: Report, fmt: str, *, history: list[SessionSummary] | None = None,
         terminal: Terminal | None = None) -> str:
    """What ``--format fmt`` prints on stdout. On a ``terminal``, an emitter that has ``on_terminal`` (the table)
    fits its width and colours; every other format is the same text as its file (JSON, SQL are never coloured)."""
    emitter: Any = EMITTERS[fmt]
    if terminal is not None and hasattr(emitter, "on_terminal"):
        return str(emitter.on_terminal(check(report), terminal))
    return next(iter(render(report, fmt, history=history).values()), "")  # a format with no file says nothing


def write_outputs(report: Report, directory: Path, *, history: list[SessionSummary] | None = None) -> list[Path]:
    """Every emitter's files into ``directory``, each written atomically (the export-only formats' files are
    written by ``tuner export``)."""
    files: dict[str, str] = {}
    for emitter in EMITTERS.values():
        if not getattr(type(emitter), "export_only", False):
            files.update(render(report, emitter.name, history=history))
    return write_files(files, directory)
