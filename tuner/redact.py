"""One redaction for everything tuner prints that may hold a secret: configuration (``config validate --print``,
``daemon --check-config``), log lines and error messages.

Hidden, as ``***``:

- a DSN's ``password=`` (and ``sslpassword=``) value, quoted the libpq way (``'a b\\'c'``) or a bare word;
- a URI's password: the userinfo after the first ``:`` up to the *last* ``@`` before the host — asyncpg splits
  the authority there (``urllib.parse.urlsplit``), so ``postgresql://u:p@ss@host`` has the password ``p@ss``;
- inside a command, ``PGPASSWORD=…`` as the shell reads the word (quotes and backslashes) and any of the above.

Over-hiding is accepted where the text is ambiguous (a raw ``?`` or ``/`` in a URI password): a secret shown once
is the failure that matters.
"""

from __future__ import annotations

import re

MASK = "***"

_URI_START = re.compile(r"postgres(?:ql)?://", re.IGNORECASE)
# libpq's conninfo parser ends a bare value at ASCII whitespace only (isspace() in the C locale: fe-connect.c,
# conninfo_parse): a U+00A0 or U+3000 is part of the password, so it must not end what is hidden.
LIBPQ_SPACE = " \t\n\r\f\v"
_DSN_PASSWORD = re.compile(rf"(password[{LIBPQ_SPACE}]*=[{LIBPQ_SPACE}]*)('(?:[^'\\]|\\.)*'?|[^{LIBPQ_SPACE}]+)",
                           re.IGNORECASE)
_PGPASSWORD = re.compile(r"(PGPASSWORD\s*=\s*)", re.IGNORECASE)
_URI_END = " \t\r\n\"'`;|&<>()"


def dsn(value: str | None) -> str:
    """A connection string (a DSN or URI) with any password replaced by :data:`MASK`; none is the PG* environment."""
    if not value:
        return "(PG* environment)"
    return text(value)


def text(value: str) -> str:
    """``value`` with every password it holds replaced by :data:`MASK`."""
    value = _uris(value)
    value = _shell_words(value)
    return _DSN_PASSWORD.sub(lambda m: m.group(1) + MASK if m.group(2) != MASK else m.group(0), value)


def _uris(value: str) -> str:
    out, pos = [], 0
    for m in _URI_START.finditer(value):
        if m.start() < pos:
            continue
        end = m.end()
        opener = value[m.start() - 1] if m.start() else ""
        if m.start() == 0 and not pos:
            end = len(value)  # a DSN on its own (a configuration value): the URI is all of it, spaces included
        elif opener in "'\"":
            close = value.find(opener, end)  # a quoted URI in a command: up to its closing quote
            end = len(value) if close < 0 else close
        else:
            while end < len(value) and value[end] not in _URI_END:
                end += 1
        out.append(value[pos:m.end()])
        out.append(_uri_userinfo(value[m.end():end]))
        pos = end
    out.append(value[pos:])
    return "".join(out)


def _uri_userinfo(rest: str) -> str:
    """``rest`` (a URI after its scheme) with the password in its userinfo hidden."""
    query = rest.find("?")
    head = rest if query < 0 else rest[:query]
    at = head.rfind("@")
    if at < 0:
        at = rest.rfind("@")  # a raw "?" inside the password: hide up to the last "@" anywhere
    if at < 0:
        return rest
    user, colon, _password = rest[:at].partition(":")
    return f"{user}:{MASK}{rest[at:]}" if colon else rest


def _shell_words(value: str) -> str:
    """Hide the word after each ``PGPASSWORD=`` as a POSIX shell reads it (quotes, backslash escapes)."""
    out, pos = [], 0
    for m in _PGPASSWORD.finditer(value):
        if m.start() < pos:
            continue
        end, quote = m.end(), ""
        while end < len(value):
            ch = value[end]
            if quote:
                if ch == "\\" and quote == '"' and end + 1 < len(value):
                    end += 1
                elif ch == quote:
                    quote = ""
            elif ch in "'\"":
                quote = ch
            elif ch == "\\" and end + 1 < len(value):
                end += 1
            elif ch in " \t\n;|&":  # the shell splits words at its IFS (space, tab, newline) only
                break
            end += 1
        out.append(value[pos:m.end()] + MASK)
        pos = end
    out.append(value[pos:])
    return "".join(out)
