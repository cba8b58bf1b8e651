"""Writing TOML (tomllib only reads it): ``tuner config validate --print`` shows the effective configuration as a
file tuner would read back to the same values."""

from __future__ import annotations

import json
import math
from typing import Any


def dumps(data: dict[str, Any]) -> str:
    """``data`` (tables of scalars, arrays, tables and arrays of tables) as TOML that :func:`tomllib.loads` reads
    back to the same values; ``None`` becomes a comment (TOML has no null)."""
    lines: list[str] = []
    _table(lines, [], data)
    return "\n".join(lines).lstrip("\n") + "\n"


def _key(k: str) -> str:
    return k if k and all(c.isalnum() and c.isascii() or c in "_-" for c in k) else json.dumps(k, ensure_ascii=True)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf"))
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items() if x is not None) + "}"
    # A TOML basic string: JSON's escapes (\n, \", \\, \uXXXX) are TOML's, so no value can break out of it.
    return json.dumps(str(v), ensure_ascii=True)


def _is_tables(v: Any) -> bool:
    return isinstance(v, (list, tuple)) and bool(v) and all(isinstance(x, dict) for x in v)


def _table(lines: list[str], path: list[str], body: dict[str, Any], *, array: bool = False) -> None:
    if path:
        name = ".".join(_key(p) for p in path)
        lines += ["", f"[[{name}]]" if array else f"[{name}]"]
    nested = []
    for k, v in body.items():
        if isinstance(v, dict) or _is_tables(v):
            nested.append((k, v))
        elif v is None:
            lines.append(f"# {_key(k)} is unset")
        else:
            lines.append(f"{_key(k)} = {_value(v)}")
    for k, v in nested:
        if isinstance(v, dict):
            _table(lines, [*path, k], v)
        else:
            for item in v:
                _table(lines, [*path, k], item, array=True)
