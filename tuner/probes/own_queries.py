"""Your own probe queries (``[workload] queries``), read with PostgreSQL's own parser (pglast): a query may begin
with ``SET name = value;`` statements that apply to it alone — the planner's settings only, so a query can plan the
way it does in production (the seed thread's gp2 range plans as a bitmap heap scan only with
``SET enable_indexscan = off``) without a probe changing anything but how that one query is planned and run.

Pure: checked when the configuration is loaded, so a wrong entry is one sentence before any server is touched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pglast
from pglast import ast
from pglast.enums.parsenodes import VariableSetKind

# The planner's settings (PostgreSQL docs, "Query Planning": planner method configuration, the cost constants,
# effective_cache_size) and the two the probe itself sets for clean numbers (jit, parallel workers); work_mem
# decides whether a bitmap is exact or lossy. The enable_* switches are all planner method settings.
PLANNER_SETTINGS = frozenset({
    "random_page_cost", "seq_page_cost", "cpu_tuple_cost", "cpu_index_tuple_cost", "cpu_operator_cost",
    "effective_cache_size", "work_mem", "jit", "max_parallel_workers_per_gather",
})
ALLOWED = "enable_*, " + ", ".join(sorted(PLANNER_SETTINGS))
_BARE = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*|-?[0-9]+(?:\.[0-9]+)?)$")


class QueryRefused(ValueError):
    """An entry of ``[workload] queries`` tuner will not run: one sentence, and the hint that fixes it."""

    def __init__(self, message: str, *, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


@dataclass(frozen=True)
class OwnQuery:
    """One entry: the query as written, and the settings that apply to it alone, in their order."""

    sql: str
    settings: tuple[tuple[str, str], ...] = ()


def allowed(name: str) -> bool:
    """Whether ``name`` is a planner setting a query may set for itself."""
    return name.startswith("enable_") or name in PLANNER_SETTINGS


def shown(settings: tuple[tuple[str, str], ...], sql: str) -> str:
    """The query as it is run, its own SETs first: ``SET enable_indexscan = off; SELECT …``."""
    sets = "".join(f"SET {n} = {v if _BARE.match(v) else quote(v)}; " for n, v in settings)
    return sets + sql


def quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _value(arg: Any) -> str | None:
    if not isinstance(arg, ast.A_Const) or arg.isnull:
        return None
    val = arg.val
    if isinstance(val, ast.Integer):
        return str(val.ival)
    if isinstance(val, ast.Float):
        return str(val.fval)
    if isinstance(val, ast.String):
        return str(val.sval)
    if isinstance(val, ast.Boolean):
        return "on" if val.boolval else "off"
    return None


def _setting(stmt: Any, number: int) -> tuple[str, str]:
    hint = f"begin a query only with SET name = value; for the planner's settings ({ALLOWED})"
    if not isinstance(stmt, ast.VariableSetStmt):
        raise QueryRefused(f"query {number} holds a {type(stmt).__name__.removesuffix('Stmt')} statement before "
                           "its query, and only SET statements may come first", hint=hint)
    name = str(stmt.name or "")
    if stmt.kind != VariableSetKind.VAR_SET_VALUE or not name:
        raise QueryRefused(f"query {number} resets or defaults a setting, and only SET name = value may come first",
                           hint=hint)
    if not allowed(name):
        raise QueryRefused(f"query {number} sets {name}, which is not one of the planner's settings a query may "
                           "set for itself", hint=hint)
    values = [_value(a) for a in stmt.args or ()]
    if len(values) != 1 or values[0] is None:
        raise QueryRefused(f"query {number} sets {name} to {'a list' if len(values) > 1 else 'no plain value'}",
                           hint=hint)
    return name, values[0]


def parse(entry: str, number: int = 1) -> OwnQuery:
    """One entry of ``[workload] queries`` (the ``number``-th, for the sentence): its leading SETs and its query,
    or :class:`QueryRefused`. The query's text is kept as written."""
    try:
        parsed = pglast.parse_sql(entry)
    except pglast.parser.ParseError as exc:
        raise QueryRefused(f"query {number} could not be parsed ({exc})",
                           hint="give one SQL query, optionally preceded by SET statements") from None
    if not parsed or isinstance(parsed[-1].stmt, ast.VariableSetStmt):
        raise QueryRefused(f"query {number} holds no query after its SET statements",
                           hint="end the entry with the query the SETs apply to")
    settings = tuple(_setting(raw.stmt, number) for raw in parsed[:-1])
    raw = entry.encode()
    last = parsed[-1]
    start = last.stmt_location or 0
    end = start + last.stmt_len if last.stmt_len else len(raw)
    sql = raw[start:end].decode().strip().rstrip(";").strip()
    return OwnQuery(sql=sql, settings=settings)
