"""The ``options`` startup parameter (and PGOPTIONS) read the way PostgreSQL reads it, to see what a client sets.

The server splits ``options`` at unescaped white space, a backslash escaping the next character
(``pg_split_opts()`` in src/backend/utils/init/postinit.c), then reads each word as a command-line switch:
``-c name=value``, ``-cname=value`` or ``--name=value``, a ``-`` in a name read as ``_`` (``ParseLongOption()``;
https://www.postgresql.org/docs/current/libpq-connect.html#LIBPQ-CONNECT-OPTIONS). GUC names are
case-insensitive, so ``TUNER.ROLE`` and ``tuner.r\\ole`` both set ``tuner.role``.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Mapping

from tuner.errors import ConfigError
from tuner.target.connection import to_uri


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


def dsn_options(dsn: str | None) -> str:
    """The ``options`` value(s) a DSN carries, unquoted and unescaped as libpq does (empty if none)."""
    if not dsn:
        return ""
    try:
        query = urllib.parse.urlsplit(to_uri(dsn)).query
    except ConfigError:
        return ""
    return " ".join(v for k, v in urllib.parse.parse_qsl(query, keep_blank_values=True) if k == "options")


def client_sets(prefix: str, dsn: str | None, environ: Mapping[str, str] | None = None) -> bool:
    """True if the client — the DSN's ``options`` or PGOPTIONS — sets any setting whose name holds ``prefix``
    (lower case), after the server's own unescaping. Holds, not starts with: a clustered switch (``-Fctuner.x``)
    keeps its flags in front, and a false alarm only refuses."""
    env = os.environ if environ is None else environ
    text = f"{dsn_options(dsn)} {env.get('PGOPTIONS', '')}"
    return any(prefix in name for name in setting_names(text))
