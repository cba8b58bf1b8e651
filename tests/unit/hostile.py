"""The hostile-input suite's registry: every DISTINCT input it throws at tuner, counted once however many formats or
commands it is run through (a report rendered in twelve formats is one input).

Each hostile module lists its inputs as :class:`Input`: a name, the surface it enters by (a configuration file, a
report, a stored row, a journal, a DSN, a command-line value, an API request, an output directory, ...) and its
*material* — the input itself, as text. For a command-line case the material is what it plants (files, described
down to the closures that make them, and their modes and owners), its environment and its arguments without the
ones that only choose how the input is read or rendered (the command, ``--format``, ``--output out``, ``--state-dir
.``, the planted file's own path): :func:`case_inputs` derives it, so cases that share an input name must share it
too, and two names may never share one. tests/unit/test_hostile_count.py collects every module's inputs.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The findings of issue #59 a registered input covers ("59.3": item 3, "59.udev": the misleading udev/tuned
# sentence). A module joins by listing its INPUTS, built with case_inputs() or as Input(...), and by its name in
# test_hostile_count.MODULES.
FINDINGS_59 = {"59.1", "59.2", "59.3", "59.4", "59.5", "59.6", "59.7", "59.8", "59.9", "59.udev"}


@dataclass(frozen=True)
class Input:
    """One distinct hostile input."""

    name: str
    surface: str
    material: str
    findings: frozenset[str] = frozenset()


def describe(value: Any) -> str:
    """A canonical text of ``value``: data as itself, a function as its code, constants and closure (so two
    lambdas that plant different files differ, and one planted twice is equal)."""
    if isinstance(value, functools.partial):
        return f"partial({describe(value.func)}, {describe(value.args)}, {describe(value.keywords)})"
    code = getattr(value, "__code__", None)
    if code is not None:
        cells = [describe(c.cell_contents) for c in value.__closure__ or ()]
        consts = [describe(c) for c in code.co_consts if getattr(c, "co_code", None) is None]
        return f"{value.__qualname__}<{code.co_code.hex()}|{consts}|{code.co_names}|{cells}|{describe(value.__defaults__)}>"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{describe(k)}: {describe(v)}" for k, v in sorted(value.items(), key=str)) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(describe(v) for v in value) + "]"
    if isinstance(value, set | frozenset):
        return "{" + ", ".join(sorted(describe(v) for v in value)) + "}"
    if isinstance(value, Path):
        return f"Path({str(value)!r})"
    return repr(value)


_COMMANDS = {"recommend", "export", "show", "history", "diff", "prune", "restore", "config", "validate", "daemon",
             "check"}
_FORMATS = {"table", "json", "sql", "host", "html", "conf", "ansible", "patroni", "cnpg", "zalando", "udev", "tuned"}


def _how_read(args: list[str], files: Mapping[str, Any]) -> list[str]:
    """``args`` without what only chooses how the input is read or rendered."""
    out, i = [], 0
    while i < len(args) and args[i] in _COMMANDS:
        i += 1
    while i < len(args):
        a, v = args[i], args[i + 1] if i + 1 < len(args) else None
        if (a == "--format" and v in _FORMATS) or (a in ("--config", "--from") and v in files) or \
                (a == "--state-dir" and v == ".") or (a == "--output" and v == "out") or (a == "--older-than"):
            i += 2
        elif a in ("--dry-run", "1111", "2222"):  # prune's flag, diff's session references
            i += 1
        else:
            out.append(a)
            i += 1
    return out


def case_material(case: Any) -> str:
    """The material of a command-line case (``tests.unit.test_hostile_inputs.Case``)."""
    return describe({"files": case.files, "env": case.env, "args": _how_read(list(case.args), case.files)})


def case_inputs(cases: Iterable[tuple[str, Any]], surface: str, *, findings: Mapping[str, set[str]] | None = None,
                material: Any = case_material) -> list[Input]:
    """The distinct inputs of ``cases`` (name, case): each case's input is ``case.input`` or its own name, and
    cases of one input must have one material. ``findings`` maps an input name to the #59 findings it covers."""
    seen: dict[str, Input] = {}
    for name, case in cases:
        key = getattr(case, "input", "") or name
        made = Input(key, surface, material(case), frozenset((findings or {}).get(key, set())))
        if key in seen:
            assert seen[key].material == made.material, f"{name}: not the input {key} it names"
        else:
            seen[key] = made
    return list(seen.values())
