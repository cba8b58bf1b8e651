"""A statement as ``pg_stat_statements`` stores it — normalised, its constants replaced by ``$1``, ``$2`` — read with
PostgreSQL's own parser (pglast, libpg_query) and made replayable again: whether it only reads, which column each
parameter is compared to, and values for them drawn from that column's statistics (``pg_stats``).

Pure: nothing here talks to a server, so every rule is tested on given texts and statistics
(:mod:`tuner.probes.statements` asks the server for the statistics and judges the plans).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pglast
from pglast import ast
from pglast.enums.parsenodes import A_Expr_Kind

# How a parameter is used, which decides the value it gets: "eq" and "in" a common value; "lt"/"gt" the bound below
# or above which a small share of the rows lies; "lo"/"hi" a BETWEEN's two ends; "any" an array of values.
Use = Literal["eq", "lt", "gt", "lo", "hi", "in", "any"]

_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}
_USE_OF_OP: dict[str, Use] = {"=": "eq", "<": "lt", "<=": "lt", ">": "gt", ">=": "gt"}
_WRITES = (ast.InsertStmt, ast.UpdateStmt, ast.DeleteStmt, ast.MergeStmt)
# Shares of a column's histogram a filled statement selects, tried in order until the filled statement plans as
# the normalised one did: a narrow range first (what an application's lookups usually are), then a wider one.
SPANS = (0.01, 0.1)


@dataclass(frozen=True)
class ParamUse:
    """Parameter ``$number`` compared to ``column`` (of the table ``qualifier`` names, if any) as ``use`` says;
    ``position`` is its place in an IN list."""

    number: int
    column: str
    qualifier: str | None
    use: Use
    position: int = 0


@dataclass(frozen=True)
class TableRef:
    name: str
    schema: str | None
    alias: str | None

    def qualified(self) -> str:
        """The name as SQL: quoted, with its schema where the statement gave one."""
        return ".".join(_quote(p) for p in (self.schema, self.name) if p)


@dataclass(frozen=True)
class Shape:
    """What the parser says of a normalised statement: why it cannot be replayed (``refusal``), or that it is not a
    query at all (``utility``: SET, BEGIN, EXPLAIN… — not listed, not replayed), its parameters and tables."""

    refusal: str | None = None
    utility: bool = False
    params: tuple[int, ...] = ()
    uses: dict[int, ParamUse] = field(default_factory=dict)
    tables: tuple[TableRef, ...] = ()


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _walk(node: Any) -> Iterator[Any]:
    """Every node under ``node`` (itself included), depth first."""
    if isinstance(node, (tuple, list)):
        for item in node:
            yield from _walk(item)
    elif isinstance(node, ast.Node):
        yield node
        for name in getattr(type(node), "__slots__", ()):
            value = getattr(node, name, None)
            if isinstance(value, (ast.Node, tuple, list)):
                yield from _walk(value)


def _param(node: Any) -> int | None:
    """The number of a parameter, also under a cast (``$1::int``)."""
    while isinstance(node, ast.TypeCast):
        node = node.arg
    return int(node.number or 0) if isinstance(node, ast.ParamRef) else None


def _column(node: Any) -> tuple[str | None, str] | None:
    """(qualifier, column) of a column reference, also under a cast; None for anything else."""
    while isinstance(node, ast.TypeCast):
        node = node.arg
    fields: Any = getattr(node, "fields", None) or ()
    if not isinstance(node, ast.ColumnRef) or not all(isinstance(f, ast.String) for f in fields):
        return None
    names = [str(f.sval) for f in fields]
    return (names[-2] if len(names) >= 2 else None), names[-1]


def _uses(expr: Any) -> list[ParamUse]:
    op = str(expr.name[-1].sval) if expr.name and isinstance(expr.name[-1], ast.String) else ""
    col, other, flipped = _column(expr.lexpr), expr.rexpr, False
    if col is None:
        col, other, flipped = _column(expr.rexpr), expr.lexpr, True
    if col is None:
        return []
    qualifier, column = col
    kind = expr.kind
    if kind in (A_Expr_Kind.AEXPR_BETWEEN, A_Expr_Kind.AEXPR_BETWEEN_SYM) and isinstance(other, (tuple, list)) \
            and len(other) == 2:
        ends: list[tuple[int | None, Use]] = [(_param(other[0]), "lo"), (_param(other[1]), "hi")]
        return [ParamUse(n, column, qualifier, use) for n, use in ends if n is not None]
    if kind == A_Expr_Kind.AEXPR_IN and isinstance(other, (tuple, list)):
        return [ParamUse(n, column, qualifier, "in", i) for i, item in enumerate(other)
                if (n := _param(item)) is not None]
    if kind == A_Expr_Kind.AEXPR_OP_ANY and op == "=" and (n := _param(other)) is not None:
        return [ParamUse(n, column, qualifier, "any")]
    if kind == A_Expr_Kind.AEXPR_OP and (n := _param(other)) is not None:
        op = _FLIP.get(op, op) if flipped else op
        if op in _USE_OF_OP:
            return [ParamUse(n, column, qualifier, _USE_OF_OP[op])]
    return []


def analyse(text: str) -> Shape:
    """The shape of one normalised statement (one sentence in ``refusal`` when it cannot be replayed)."""
    try:
        parsed = pglast.parse_sql(text)
    except pglast.parser.ParseError as exc:
        return Shape(refusal=f"its text could not be parsed ({exc})")
    if len(parsed) != 1:
        return Shape(refusal="its text holds more than one statement")
    stmt = parsed[0].stmt
    nodes = list(_walk(stmt))
    if isinstance(stmt, _WRITES):
        return Shape(refusal="writes")
    if not isinstance(stmt, ast.SelectStmt):
        return Shape(utility=True)
    if any(isinstance(n, _WRITES) for n in nodes):
        return Shape(refusal="writes (a data-modifying WITH)")
    if any(isinstance(n, ast.SelectStmt) and n.intoClause is not None for n in nodes):
        return Shape(refusal="writes (SELECT INTO creates a table)")
    if any(isinstance(n, ast.SelectStmt) and n.lockingClause for n in nodes):
        return Shape(refusal="locks rows (FOR UPDATE/SHARE), which a read-only replay cannot")
    params = tuple(sorted({int(n.number or 0) for n in nodes if isinstance(n, ast.ParamRef)}))
    uses: dict[int, ParamUse] = {}
    for n in nodes:
        if isinstance(n, ast.A_Expr):
            for u in _uses(n):
                uses.setdefault(u.number, u)
    tables = tuple(dict.fromkeys(
        TableRef(str(n.relname), n.schemaname, n.alias.aliasname if n.alias is not None else None)
        for n in nodes if isinstance(n, ast.RangeVar)))
    return Shape(params=params, uses=uses, tables=tables)


def table_of(use: ParamUse, tables: Sequence[TableRef]) -> list[TableRef]:
    """The tables ``use``'s column may belong to: the one its qualifier names, else every table of the statement
    (the caller keeps the one whose statistics have the column)."""
    if use.qualifier is None:
        return list(tables)
    return [t for t in tables if (t.alias or t.name) == use.qualifier]


@dataclass(frozen=True)
class ColumnStats:
    """A column's statistics as ``pg_stats`` gives them, as text: ``bounds`` the histogram (ascending),
    ``common`` the most common values (most common first), ``type`` the column's type."""

    bounds: tuple[str, ...]
    common: tuple[str, ...]
    type: str


def value_for(use: ParamUse, stats: ColumnStats, span: float) -> str | list[str] | None:
    """A value (or, for ``= ANY``, values) for a parameter from its column's statistics: a common value for an
    equality, bounds ``span`` of the histogram apart for a range (around its middle), None when the statistics
    hold nothing to draw from."""
    b, c = stats.bounds, stats.common
    if not b and not c:
        return None
    mid = len(b) // 2
    step = max(1, round(span * (len(b) - 1) / 2)) if b else 0
    if use.use == "eq":
        return c[0] if c else b[mid]
    if use.use == "in":
        pool = list(c) + list(b)
        return pool[use.position % len(pool)]
    if use.use == "any":
        pool = list(dict.fromkeys(list(c[:5]) + list(b[mid:mid + 5])))
        return pool or None
    if not b:  # a range on a column with few distinct values: its most common one
        return c[0]
    if use.use in ("lo", "gt"):
        # "col > x": x near the top, so a span's share of the rows lies above it; a BETWEEN's low end below the middle.
        return b[max(0, mid - step)] if use.use == "lo" else b[max(0, len(b) - 1 - 2 * step)]
    if use.use == "hi":
        return b[min(len(b) - 1, mid + step)]
    return b[min(len(b) - 1, 2 * step)]  # "lt": near the bottom


def literal(value: str | list[str], type_name: str) -> str:
    """``value`` as an SQL literal of ``type_name``: quoted, with an explicit cast (arrays as an array literal)."""
    if isinstance(value, list):
        items = ",".join('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in value)
        text = "{" + items + "}"
    else:
        text = value
    return "'" + text.replace("'", "''") + "'::" + type_name


def fill(text: str, literals: dict[int, str]) -> str:
    """``text`` with each parameter token ``$n`` replaced by ``literals[n]`` (found by PostgreSQL's scanner, so a
    ``$1`` inside a quoted identifier is left alone)."""
    out, last = [], 0
    for token in pglast.parser.scan(text):
        if token.name == "PARAM":
            number = int(text[token.start + 1:token.end + 1])
            out.append(text[last:token.start])
            out.append(f"({literals[number]})")
            last = token.end + 1
    out.append(text[last:])
    return "".join(out)
