"""Outside text shown on one line: the characters that could start a line of their own or steer a terminal
(control and format characters, line and paragraph separators, lone surrogates) and their visible escapes. The
lowest layer of tuner.emit.quote, kept apart so that checks below the emitters (tuner.report.validate) can name a
bad value the way every emitter would show it."""

from __future__ import annotations

import unicodedata

# Control characters (C0, DEL, C1 — NEL is U+0085), format characters (bidi overrides, zero-width), lone
# surrogates (undecodable bytes from os.uname or a path) and the Unicode line and paragraph separators.
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def unsafe(ch: str) -> bool:
    """Whether ``ch`` must not appear raw in a line of output."""
    return unicodedata.category(ch) in _UNSAFE_CATEGORIES


def escape(ch: str, byte_below: int = 0x100) -> str:
    """``\\n``, ``\\xHH`` (below ``byte_below``), ``\\uXXXX`` or ``\\UXXXXXXXX``: C's escapes, which are also
    PostgreSQL's in E'' strings (there \\x means a byte, so only below 0x80)."""
    code = ord(ch)
    if ch in _NAMED:
        return _NAMED[ch]
    return f"\\x{code:02x}" if code < byte_below else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def one_line(text: object) -> str:
    """``text`` as one line for a comment or a terminal: line breaks, control and format characters become
    visible escapes (``\\n``, ``\\x1b``, ``\\u2028``), so nothing after them can start a line of its own."""
    return "".join(escape(ch) if unsafe(ch) else ch for ch in str(text))


def shown(text: object, limit: int = 80) -> str:
    """``text`` quoted for a message, on one line and cut at ``limit`` characters."""
    line = one_line(text)
    return f"'{line[:limit]}'" + ("..." if len(line) > limit else "")


def shortened(text: object, limit: int = 80) -> str:
    """``text`` (a statement) on one line, its runs of white space as one space, cut at ``limit`` characters with
    an ellipsis: how the per-query lines show a query."""
    line = " ".join(one_line(text).replace("\\n", " ").replace("\\t", " ").split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
