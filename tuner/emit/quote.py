"""Text from outside (the server, the host, sysfs) on its way into output: the one place that quotes it.

Everything tuner writes is read by something that acts on it — psql on the primary, ``sh`` as root, udev, a
terminal — and much of what it writes comes from outside: tablespace and setting names, today's values, reasons,
server version strings, host and kernel names, device names and their udev attributes. Each syntax gets one
function here, and every emitter goes through them:

- :func:`one_line` — text for a comment (``--``, ``#``) or a terminal: no line breaks, no control characters.
- :func:`comment` — ``#`` comment lines of one_line text, wrapped to :data:`COMMENT_WIDTH` columns.
- :func:`ident`, :func:`setting`, :func:`literal` — SQL identifiers, setting names and values.
- :func:`device_node`, :func:`sysfs_path` — the paths a root shell script writes to, checked and shell-quoted.
- :func:`sysname` — a kernel name for ``udevadm trigger --sysname-match=``.
- :func:`udev_value` — a value in a udev rule's match key.
- :func:`conf_setting`, :func:`conf_value` — a line of a PostgreSQL configuration file (``include_dir``).
- :func:`setting_text` — a value for a serializer that quotes it itself (YAML, JSON): Patroni, Kubernetes.
- :func:`plain` — a value a consumer writes unquoted (Ansible's ALTER SYSTEM module, tuned).
- :func:`tuned_match` — a tuned ``devices_udev_regex`` that matches one udev property exactly.

What cannot be written safely raises :class:`Unrenderable`; the emitters then say so instead of writing it.
"""

from __future__ import annotations

import re
import shlex
import textwrap
import unicodedata
from collections.abc import Callable
from typing import TypeVar

from tuner.hostfacts.blockdev import MATCH_KEYS
from tuner.report.text import escape as _escape
from tuner.report.text import one_line as one_line  # re-exported: every emitter quotes through this module
from tuner.report.text import shown as shown
from tuner.report.text import unsafe as unsafe

T = TypeVar("T")

# PostgreSQL 18's src/include/parser/kwlist.h: every keyword that is not UNRESERVED_KEYWORD (reserved,
# type_func_name and col_name keywords). Quoting one of these is what PostgreSQL's own quote_ident() does; an
# unreserved keyword is a valid identifier. tests/unit/test_hostile_output.py compares this with pglast's copy.
KEYWORDS = frozenset("""
    all analyse analyze and any array as asc asymmetric both case cast check collate column constraint create
    current_catalog current_date current_role current_time current_timestamp current_user default deferrable desc
    distinct do else end except false fetch for foreign from grant group having in initially intersect into lateral
    leading limit localtime localtimestamp not null offset on only or order placing primary references returning
    select session_user some symmetric system_user table then to trailing true union unique user using variadic when
    where window with
    authorization binary collation concurrently cross current_schema freeze full ilike inner is isnull join left
    like natural notnull outer overlaps right similar tablesample verbose
    between bigint bit boolean char character coalesce dec decimal exists extract float greatest grouping inout int
    integer interval json json_array json_arrayagg json_exists json_object json_objectagg json_query json_scalar
    json_serialize json_table json_value least merge_action national nchar none normalize nullif numeric out overlay
    position precision real row setof smallint substring time timestamp treat trim values varchar xmlattributes
    xmlconcat xmlelement xmlexists xmlforest xmlnamespaces xmlparse xmlpi xmlroot xmlserialize xmltable
""".split())

NAME_MAX_BYTES = 63  # NAMEDATALEN - 1: a longer name is truncated by the server, so it names something else

_PLAIN_IDENT = re.compile(r"[a-z_][a-z0-9_]*")
_SETTING_PART = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INTEGER = re.compile(r"-?[0-9]+")
_DEVICE_NODE = re.compile(r"/dev/[A-Za-z0-9._/-]+")
_SYSFS_PATH = re.compile(r"/sys/[A-Za-z0-9._:/!+-]+/read_ahead_kb")
_SYSNAME = re.compile(r"[A-Za-z0-9._:!+-]+")  # a kernel name as /sys/block lists it (cciss!c0d0), no glob
_KERNEL_NAME = re.compile(r"[A-Za-z0-9._:!+-]+\*?")  # a kernel name, or tuner's own prefix pattern (loop*)


class Unrenderable(ValueError):
    """Text that cannot be written safely in the syntax asked for; the message says why."""


def attempt(render: Callable[[], T]) -> tuple[T | None, str | None]:
    """``render()`` and None, or None and why it could not be written."""
    try:
        return render(), None
    except Unrenderable as exc:
        return None, str(exc)


def _refuse_unstorable(text: str, what: str) -> None:
    if "\x00" in text:
        raise Unrenderable(f"{what} {shown(text)} contains NUL, which PostgreSQL cannot store")
    if any(unicodedata.category(ch) == "Cs" for ch in text):
        raise Unrenderable(f"{what} {shown(text)} is not valid UTF-8")


def ident(name: str) -> str:
    """A PostgreSQL identifier: bare when it is lower-case, plain and not a keyword, else double-quoted; a name
    with control characters is written with Unicode escapes (``U&"a\\000ab"``) so it stays on one line."""
    _refuse_unstorable(name, "the name")
    if not name:
        raise Unrenderable("an empty name")
    if len(name.encode()) > NAME_MAX_BYTES:
        raise Unrenderable(f"the name {shown(name)} is longer than {NAME_MAX_BYTES} bytes: the server "
                           "would truncate it to another name")
    if _PLAIN_IDENT.fullmatch(name) and name not in KEYWORDS:
        return name
    if not any(unsafe(ch) for ch in name):
        return '"' + name.replace('"', '""') + '"'
    body = "".join(
        "\\\\" if ch == "\\" else '""' if ch == '"'
        else (f"\\{ord(ch):04x}" if ord(ch) < 0x10000 else f"\\+{ord(ch):06x}") if unsafe(ch) else ch
        for ch in name
    )
    return f'U&"{body}"'


def setting(name: str) -> str:
    """A setting name (``effective_io_concurrency``, ``auto_explain.log_min_duration``): ASCII identifier parts
    joined by dots, each quoted by :func:`ident` where it needs it; anything else is refused."""
    parts = name.split(".")
    if not all(_SETTING_PART.fullmatch(p) for p in parts):
        raise Unrenderable(f"not a setting name: {shown(name)}")
    return ".".join(ident(p) for p in parts)


def literal(value: int | str) -> str:
    """A setting's value as SQL: integers bare, anything else a string literal with ``''`` doubled. A value with
    backslashes or control characters is written as ``E'...'`` with escapes — the same value whatever
    ``standard_conforming_strings`` says, and on one line."""
    number = _as_int(value)
    if number is not None:
        return str(number)
    text = str(value)
    _refuse_unstorable(text, "the value")
    if "\\" not in text and not any(unsafe(ch) for ch in text):
        return "'" + text.replace("'", "''") + "'"
    return "E'" + "".join(
        "\\\\" if ch == "\\" else "''" if ch == "'" else _escape(ch, 0x80) if unsafe(ch) else ch for ch in text
    ) + "'"


def integer(value: int | str, what: str) -> int:
    """``value`` as an integer for a command line, or :class:`Unrenderable`."""
    number = _as_int(value)
    if number is None:
        raise Unrenderable(f"{what} {shown(value)} is not an integer")
    return number


def _as_int(value: int | str) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return int(value) if isinstance(value, str) and _INTEGER.fullmatch(value) else None


def _path(path: str, pattern: re.Pattern[str], what: str) -> str:
    if not pattern.fullmatch(path) or ".." in path.split("/"):
        raise Unrenderable(f"{what} {shown(path)} does not look like one")
    return shlex.quote(path)


def device_node(node: str) -> str:
    """A device node for a root shell command: /dev/NAME of plain characters (no ``..``), shell-quoted."""
    return _path(node, _DEVICE_NODE, "the device node")


COMMENT_WIDTH = 100  # a file read in a terminal or a review diff; longer lines wrap there, or run off the screen


def comment(text: object) -> list[str]:
    """``text`` as ``#`` comment lines of at most :data:`COMMENT_WIDTH` characters: made one line first (nothing
    in it can end the comment), then wrapped at spaces, a word longer than a line cut. Continuation lines are
    indented by two more spaces, so a paragraph reads as one."""
    line = one_line(text)
    if not line:
        return ["#"]
    return textwrap.wrap(line, COMMENT_WIDTH, initial_indent="# ", subsequent_indent="#   ",
                         break_on_hyphens=False, break_long_words=True)


def sysname(name: str) -> str:
    """A block device's kernel name for ``udevadm trigger --sysname-match=``, which takes a glob: plain
    characters only, so that the trigger reaches this device and no other."""
    if not _SYSNAME.fullmatch(name):
        raise Unrenderable(f"the kernel name {shown(name)} does not look like one")
    return name


def sysfs_path(path: str) -> str:
    """A sysfs read_ahead_kb path for a root shell command, checked like :func:`device_node`."""
    return _path(path, _SYSFS_PATH, "the sysfs path")


def udev_value(key: str, value: str) -> str:
    """``KEY=="value"`` for a udev match. udev unescapes only ``\\"`` in a plain string, splits a value at ``|``
    into alternatives and matches one with ``*?[`` in it by fnmatch(3): so ``"`` is written ``\\"``, glob
    characters are escaped to match themselves, and ``|``, backslashes, control characters and empty values are
    refused. ``KERNEL`` keeps tuner's own prefix pattern (``loop*``) and must otherwise be a kernel name.

    ``key`` must be one of the match keys tuner's device discovery produces (``devices.MATCH_KEYS``): udev reads
    ``PROGRAM==``, ``IMPORT{program}==`` and ``RUN`` as commands to run as root on every event (udev(7)), and a
    rule line has no other place a key from a report may go."""
    if key not in MATCH_KEYS:
        raise Unrenderable(f"not a udev match key tuner writes: {shown(key)}")
    if key == "KERNEL":
        if not _KERNEL_NAME.fullmatch(value):
            raise Unrenderable(f"not a kernel device name: {shown(value)}")
        return f'{key}=="{value}"'
    if not value or "|" in value or "\\" in value or any(unsafe(ch) for ch in value):
        raise Unrenderable(f"the udev value {shown(value)} for {key} cannot be matched exactly "
                           "(empty, or it has |, a backslash or a control character)")
    escaped = re.sub(r"([*?\[])", r"\\\1", value).replace('"', '\\"')
    return f'{key}=="{escaped}"'


_PLAIN = re.compile(r"[A-Za-z0-9._+-]+")
_UDEV_PROPERTY = re.compile(r"[A-Z_][A-Z0-9_]*")


def conf_setting(name: str) -> str:
    """A setting name in a configuration file: the file has no quoting for names (PostgreSQL's guc-file.l reads an
    identifier, or two joined by a dot), so only ASCII identifier parts are written, as they are."""
    parts = name.split(".")
    if len(parts) > 2 or not all(_SETTING_PART.fullmatch(p) for p in parts):
        raise Unrenderable(f"not a setting name a configuration file can hold: {shown(name)}")
    return name


def conf_value(value: int | str) -> str:
    """A setting's value in a configuration file: integers bare, anything else in single quotes with ``'`` doubled
    and ``\\`` doubled (the file's strings read a backslash as an escape, GUC_scanstr). A control, format or line
    separator character is written as octal escapes of its UTF-8 bytes (``\\012``), which the file reads back as
    the same character, so the value stays on its line. NUL and undecodable characters are refused."""
    number = _as_int(value)
    if number is not None:
        return str(number)
    text = str(value)
    _refuse_unstorable(text, "the value")
    out = []
    for ch in text:
        if ch == "'":
            out.append("''")
        elif ch == "\\":
            out.append("\\\\")
        elif unsafe(ch):
            out.append("".join(f"\\{b:03o}" for b in ch.encode()))
        else:
            out.append(ch)
    return "'" + "".join(out) + "'"


def setting_text(value: int | str) -> str:
    """A setting's value as the text PostgreSQL stores (integers in decimal), for a serializer that quotes it
    itself (YAML, JSON). NUL and undecodable characters, which no server can hold, are refused."""
    number = _as_int(value)
    if number is not None:
        return str(number)
    text = str(value)
    _refuse_unstorable(text, "the value")
    return text


def plain(value: int | str, what: str) -> str:
    """``value`` as text of letters, digits and ``. _ + -`` only (``256``, ``lz4``, ``4MB``, ``-1``), for a consumer
    that writes it somewhere without quoting it: community.postgresql's ALTER SYSTEM module puts it between single
    quotes without doubling them, tuned expands ``${...}`` in its values. Anything else is refused."""
    text = str(value)
    if not _PLAIN.fullmatch(text):
        raise Unrenderable(f"{what} {shown(text)} has characters that the consumer would not read as text "
                           "(only letters, digits and . _ + - are written)")
    return text


def tuned_match(prop: str, value: str) -> str:
    """A tuned ``devices_udev_regex`` that matches the udev property ``prop`` with exactly ``value``: tuned searches
    the device's properties as ``KEY=value`` lines (re.MULTILINE), so the regex is anchored at both ends of one
    line and the value is :func:`plain` and regex-escaped."""
    if not _UDEV_PROPERTY.fullmatch(prop):
        raise Unrenderable(f"not a udev property name: {shown(prop)}")
    return f"^{prop}={re.escape(plain(value, f'the udev property {prop}'))}$"
