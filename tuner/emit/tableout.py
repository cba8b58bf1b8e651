"""Printing the terminal report at a given width: lines wrapped with a hanging indent, tables that fit or else
stanzas, decisions coloured when the terminal takes colour (:mod:`tuner.emit.table` says what is printed)."""

from __future__ import annotations

import io
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from tuner.emit import quote
from tuner.emit.terminal import Terminal, wrap

# A decision or a status, and how a terminal that takes colour shows it: a change stands out, a keep is calm, a
# family that did not run is a warning, one that failed an error.
STYLES: Mapping[str, str] = {"change": "bold green", "keep": "cyan", "skipped": "yellow", "failed": "bold red",
                             "not tunable": "yellow"}


# Spaces at the end of a line, also where a colour's reset code follows them.
_TRAILING = re.compile(r"[ ]+((?:\x1b\[[0-9;]*m)*)$")


@dataclass(frozen=True)
class Row:
    """One table row: its cells (plain text from anywhere), the cells coloured as a decision or status (column →
    key of :data:`STYLES`), and the row as lines (text, style key or None) where the table does not fit."""

    cells: tuple[str, ...]
    styles: Mapping[int, str] = field(default_factory=dict)
    stanza: Sequence[tuple[str, str | None]] = ()



@dataclass(frozen=True)
class TextTable:
    """A table a family's report section asks for (:meth:`tuner.report.model.ReportSection.table`): plain cells, printed
    by :meth:`Out.table` to the terminal's width like the report's own tables."""

    title: str | None
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    wraps: tuple[str, ...] = ()
    right: bool = False


def _widths(columns: Sequence[str], rows: Sequence[Sequence[str]], wraps: Collection[str],
            room: int) -> list[int] | None:
    """Each column's width, the table's cells inside ``room`` (the width less borders and padding) with only the
    ``wraps`` columns wrapped at their spaces; None when even the narrowest such table is wider. The widest
    wrapping column gives way first. (rich, left to itself, cuts cells short — "decisi…" — or crops the table.)"""
    def width(text: str, wrapping: bool) -> int:
        return max((cell_len(w) for w in text.split()), default=0) if wrapping else cell_len(text)

    cells = [[col, *(row[i] for row in rows)] for i, col in enumerate(columns)]
    natural = [max(cell_len(c) for c in column) for column in cells]
    least = [max(width(c, col in wraps) for c in column) for col, column in zip(columns, cells, strict=True)]
    if sum(least) > room:
        return None
    widths = list(natural)
    while sum(widths) > room:
        i = max((i for i in range(len(widths)) if widths[i] > least[i]), key=lambda i: widths[i])
        widths[i] -= 1
    return widths


class Out:
    """One report being printed for ``terminal``; :meth:`text` is what was printed."""

    def __init__(self, terminal: Terminal) -> None:
        self.terminal = terminal
        self._buf = io.StringIO()
        # Nothing taken from the environment (rich would read COLUMNS, NO_COLOR, FORCE_COLOR itself): the terminal
        # was decided once, by tuner.emit.terminal.detect.
        self._console = Console(file=self._buf, width=terminal.width, force_terminal=terminal.color,
                                color_system="standard" if terminal.color else None, no_color=not terminal.color,
                                highlight=False, markup=False, emoji=False, _environ={})

    def _style(self, key: str | None) -> str:
        return STYLES.get(key or "", "") if self.terminal.color else ""

    def say(self, line: str, *, mark: tuple[int, int, str] | None = None, key: str | None = None,
            hang: int = 2) -> None:
        """Print ``line`` (outside text, made one line) wrapped to the width; ``mark`` (start, end, style key)
        colours a span of its first line — a decision or a status word —, ``key`` the whole line."""
        lines = wrap(quote.one_line(line), self.terminal.width, hang=hang)
        for i, piece in enumerate(lines):
            text = Text(piece, style=self._style(key), no_wrap=True, overflow="ignore")
            if i == 0 and mark is not None and mark[1] <= len(piece):
                text.stylize(self._style(mark[2]), mark[0], mark[1])
            self._console.print(text)

    def table(self, title: str | None, columns: Sequence[str], rows: Sequence[Row], *,
              wraps: Collection[str] = (), right: bool = False) -> None:
        """A table, when it fits the width with only the ``wraps`` columns folded at spaces; else a stanza per row
        (the row's own, or ``column value`` pairs)."""
        texts = [[quote.one_line(cell) for cell in row.cells] for row in rows]
        widths = _widths(columns, texts, wraps, self.terminal.width - 3 * len(columns) - 1)
        if widths is not None:
            table = Table(title=title, title_justify="left", box=box.HEAVY_HEAD)
            for col, width in zip(columns, widths, strict=True):
                table.add_column(col, no_wrap=col not in wraps, justify="right" if right else "left", width=width,
                                 overflow="fold")
            for row, cells in zip(rows, texts, strict=True):
                table.add_row(*(Text(cell, style=self._style(row.styles.get(i))) for i, cell in enumerate(cells)))
            self._console.print(table)
            return
        if title:
            self.say(title)
        for row in rows:
            stanza = row.stanza or [(", ".join(f"{c} {v}" for c, v in zip(columns, row.cells, strict=True)), None)]
            for text, key in stanza:
                self.say(text, mark=None if key is None else self._decision_span(text, key))

    @staticmethod
    def _decision_span(text: str, key: str) -> tuple[int, int, str] | None:
        word = "CHANGE" if key == "change" else key
        at = text.find(f": {word}")
        return None if at < 0 else (at + 2, at + 2 + len(word), key)

    def text(self) -> str:
        """What was printed: lines without trailing spaces (rich pads a table's title to the table's width)."""
        return "\n".join(_TRAILING.sub(r"\1", line) for line in self._buf.getvalue().split("\n"))


def listing(lines: Sequence[tuple[str, str | None]], terminal: Terminal) -> str:
    """Lines (text, style key or None) fitted to ``terminal``: wrapped with a hanging indent, coloured by key."""
    out = Out(terminal)
    for text, key in lines:
        out.say(text, key=key)
    return out.text() + "\n"
