"""The terminal: what it can show — its width and whether it takes colour — and the terminal report printed to
fit it: lines wrapped with a hanging indent, tables that fit or else stanzas, decisions coloured when the terminal
takes colour (:mod:`tuner.emit.table` says what is printed).

The width is ``COLUMNS`` when set (as POSIX shells and ``shutil.get_terminal_size`` read it), else the terminal's
own, else — a pipe or a file — the 120 columns of ``report.txt``. Colour follows ``--color``: ``always`` and
``never`` are what they say; ``auto`` colours a terminal unless ``NO_COLOR`` is set and not empty
(https://no-color.org), colours a pipe too when ``FORCE_COLOR`` is set and not empty (https://force-color.org),
and never colours ``TERM=dumb``. An explicit ``--color`` wins over both variables, as no-color.org asks of
per-invocation options.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TextIO

from rich import box
from rich.cells import cell_len, chop_cells
from rich.console import Console
from rich.table import Table
from rich.text import Text

from tuner.emit import quote

FILE_WIDTH = 120  # report.txt, and stdout when it is neither a terminal nor given COLUMNS
MIN_WIDTH = 40  # below this nothing reads well: narrower terminals wrap what is printed at 40
COLOR_CHOICES = ("auto", "always", "never")


@dataclass(frozen=True)
class Terminal:
    """Where a table is printed: ``width`` in columns, and whether decisions are coloured."""

    width: int = FILE_WIDTH
    color: bool = False


def detect(choice: str, stream: TextIO, environ: Mapping[str, str] | None = None) -> Terminal:
    """The terminal ``stream`` writes to, for ``--color choice`` (auto, always, never)."""
    env = os.environ if environ is None else environ
    tty = _isatty(stream)
    return Terminal(width=_width(env, stream if tty else None), color=_color(choice, env, tty))


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or fake stream
        return False


def _width(env: Mapping[str, str], tty: TextIO | None) -> int:
    columns = env.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return max(int(columns), MIN_WIDTH)
    if tty is not None:
        try:
            return max(os.get_terminal_size(tty.fileno()).columns, MIN_WIDTH)
        except (OSError, ValueError, AttributeError):
            pass
    return FILE_WIDTH


def _color(choice: str, env: Mapping[str, str], tty: bool) -> bool:
    if choice != "auto":
        return choice == "always"
    if env.get("NO_COLOR", ""):
        return False
    if env.get("TERM", "") == "dumb":
        return False
    return bool(env.get("FORCE_COLOR", "")) or tty


def wrap(text: str, width: int, *, hang: int = 2) -> list[str]:
    """``text`` as lines of at most ``width`` terminal cells: broken at spaces, a word longer than a line cut;
    continuation lines indented ``hang`` more than the text's own leading spaces (so they read as one item)."""
    lead = len(text) - len(text.lstrip(" "))
    if cell_len(text) <= width:
        return [text]
    indent = " " * min(lead + hang, width // 2)
    lines: list[str] = []
    line = " " * min(lead, width // 2)
    bare = True  # nothing but the indentation on this line yet
    for word in text[lead:].split(" "):
        sep = "" if bare else " "
        if cell_len(line) + len(sep) + cell_len(word) <= width:
            line, bare = line + sep + word, False
            continue
        if not bare:
            lines.append(line)
            line, bare = indent, True
        while cell_len(line) + cell_len(word) > width:
            head = chop_cells(word, width - cell_len(line))[0]
            if not head:  # a double-width character does not fit what is left: it starts the next line
                lines.append(line)
                line = indent
                head = chop_cells(word, width - len(indent))[0]
            lines.append(line + head)
            word, line = word[len(head):], indent
        line, bare = line + word, not word
    if not bare:
        lines.append(line)
    return [ln.rstrip() for ln in lines]


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
