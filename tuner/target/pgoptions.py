"""The ``options`` startup parameter (and PGOPTIONS) read the way PostgreSQL reads it, to see what a client sets.

The server splits ``options`` at unescaped white space, a backslash escaping the next character
(``pg_split_opts()`` in src/backend/utils/init/postinit.c), then reads each word as a command-line switch:
``-c name=value``, ``-cname=value`` or ``--name=value``, a ``-`` in a name read as ``_`` (``ParseLongOption()``;
https://www.postgresql.org/docs/current/libpq-connect.html#LIBPQ-CONNECT-OPTIONS). GUC names are
case-insensitive, so ``TUNER.ROLE`` and ``tuner.r\\ole`` both set ``tuner.role``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from tuner.target import conninfo


def split_options(text: str) -> list[str]:
    """The words the server sees in an ``options`` string: split at unescaped white space, escapes removed."""
    words: list[str] = []
    word: list[str] = []
    escaped = started = False
    for ch in text:
        if escaped:
            word.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = started = True
        elif ch.isspace():
            if started:
                words.append("".join(word))
            word, started = [], False
        else:
            word.append(ch)
            started = True
    if started:
        words.append("".join(word))
    return words


def setting_names(text: str) -> list[str]:
    """Every setting name an ``options`` string may set, lower case, ``-`` read as ``_``. Conservative: a word's
    part before ``=`` counts whatever switch precedes it (``-c x=y``, ``-cx=y``, ``--x=y``, a clustered ``-Fcx=y``)."""
    names = []
    for word in split_options(text):
        name = word.partition("=")[0].lower().replace("-", "_")
        names.append(name.lstrip("_"))
    return names


def client_options(dsn: str | None, environ: Mapping[str, str] | None = None) -> str:
    """Every ``options`` text the client may send, unquoted and unescaped as libpq does: the resolved connection
    parameters' — ``dsn``'s over its service's (the DSN's, else PGSERVICE's, from the service file libpq reads) —
    which is exactly what :func:`tuner.target.connection.connect` sends, whatever produced them (an empty DSN, the
    PG* environment); and PGOPTIONS, which libpq sends where nothing else sets ``options`` (asyncpg does not send
    it; counted anyway — a false alarm only refuses). A DSN libpq cannot read raises :class:`ConfigError`: no
    connection could be made with it either."""
    env = os.environ if environ is None else environ
    return f"{conninfo.resolve(dsn or '', env).get('options', '')} {env.get('PGOPTIONS', '')}"

