"""YAML documents written by a real serializer (PyYAML's SafeDumper), with ``#`` comment lines before them.

Nothing is put together by hand: names and values from outside are scalars the serializer quotes, so none can
end its string, open a key of its own or start a line. The text is ASCII (``allow_unicode=False``): anything else
— line and paragraph separators, bidi overrides, NEL, which YAML would otherwise write raw or read as line breaks
— comes out as a ``\\uXXXX`` escape in a double-quoted scalar, which reads back as the same character.

:class:`Unsafe` marks a string for Ansible, which renders ``{{ ... }}``, ``{% ... %}`` and ``{# ... #}`` in every
string of a playbook or vars file it is given: tagged ``!unsafe``, Ansible keeps it as text and never templates it.
Only a string with a ``{`` in it — one that could open a template — is tagged: ansible-core 2.19 types an
``!unsafe`` scalar by its text and not by its quotes (``!unsafe '256'`` is an integer, ``!unsafe 'on'`` true,
``!unsafe ''`` null), and such text cannot hold a template anyway.
"""

from __future__ import annotations

from typing import Any

import yaml

from tuner.emit import quote


class Unsafe(str):
    """A string Ansible must take as it is (``!unsafe``): a name, value or sentence from outside."""


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:  # the same dict twice is written twice, never as &id001/*id001
        return True


def _style(text: str) -> str | None:
    """A literal block (``|``) for text of several lines; PyYAML falls back to a quoted style where a block
    cannot hold the text exactly (non-ASCII characters, trailing spaces)."""
    return "|" if "\n" in text.rstrip("\n") else None


def _str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=_style(data))


def _unsafe(dumper: yaml.SafeDumper, data: Unsafe) -> yaml.ScalarNode:
    return dumper.represent_scalar("!unsafe", str(data), style=_style(str(data)))


_Dumper.add_representer(str, _str)
_Dumper.add_representer(Unsafe, _unsafe)


def comments(lines: list[str]) -> str:
    """``#`` comment lines, each line of text made one line and wrapped (:func:`quote.comment`)."""
    return "".join(c + "\n" for line in lines for c in quote.comment(line))


def dump(data: Any, *, header: list[str] | None = None) -> str:
    """``data`` as one YAML document, with the ``header`` comment lines before it."""
    body = yaml.dump(data, Dumper=_Dumper, allow_unicode=False, sort_keys=False, default_flow_style=False,
                     width=4096, explicit_start=True)
    return comments(header or []) + body


def unsafe(data: Any) -> Any:
    """``data`` with every string value that could open a template (it has a ``{``) marked :class:`Unsafe`, for
    an Ansible vars file (keys are tuner's own variable and field names)."""
    if isinstance(data, str):
        return Unsafe(data) if "{" in data else data
    if isinstance(data, dict):
        return {k: unsafe(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [unsafe(v) for v in data]
    return data
