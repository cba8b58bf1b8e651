"""A command template with named placeholders — ``[readahead] helper_command``, run as ``sh -c`` with
``{path}``, ``{device}`` and ``{value}`` replaced by shell-quoted text — checked when the configuration is read.

``str.format`` would also take ``{0}`` (an IndexError when the command first runs, mid-session, with a device
already changed), ``{path.__class__}`` or ``{value[0]}`` (attribute and index lookups on tuner's own objects),
``{path!r}`` (a conversion that undoes the quoting) and ``{value:>99}`` (a format spec): only the bare names are
a template's fields; ``{{`` and ``}}`` stand for braces (Python's format string syntax, docs.python.org
library/string.html#formatstrings).
"""

from __future__ import annotations

import string
from typing import Annotated

from pydantic import AfterValidator

HELPER_FIELDS = ("path", "device", "value")


def template_problem(command: str, fields: tuple[str, ...] = HELPER_FIELDS) -> str | None:
    """Why ``command`` is not a template of bare ``{name}`` fields from ``fields``, or None."""
    try:
        parsed = list(string.Formatter().parse(command))
    except ValueError as exc:  # a lone { or }
        return f"is not a command template ({exc}; write {{{{ and }}}} for literal braces)"
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        if name not in fields or spec or conversion:
            shown = "{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
            return (f"has the placeholder {shown}; only {', '.join('{' + f + '}' for f in fields)} are replaced "
                    "(write {{ and }} for literal braces)")
    return None


def _helper(command: str) -> str:
    problem = template_problem(command)
    if problem:
        raise ValueError(problem)
    return command


HelperCommand = Annotated[str, AfterValidator(_helper)]
