"""What a terminal can show: its width and whether it takes colour — and text wrapped to fit it.

The width is ``COLUMNS`` when set (as POSIX shells and ``shutil.get_terminal_size`` read it), else the terminal's
own, else — a pipe or a file — the 120 columns of ``report.txt``. Colour follows ``--color``: ``always`` and
``never`` are what they say; ``auto`` colours a terminal unless ``NO_COLOR`` is set and not empty
(https://no-color.org), colours a pipe too when ``FORCE_COLOR`` is set and not empty (https://force-color.org),
and never colours ``TERM=dumb``. An explicit ``--color`` wins over both variables, as no-color.org asks of
per-invocation options.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TextIO

from rich.cells import cell_len, chop_cells

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
