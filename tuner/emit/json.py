"""The machine-readable report (schema_version 1). Recommendations are data; the statements that apply and roll
them back (``apply_sql``, ``rollback_sql``, ``host``) are computed here, when the report is written, so a
consumer finds them next to their evidence; ``not_rendered`` says why a change has none (a name or value from
outside that cannot be written safely).

The text is UTF-8 JSON that a terminal can show as it is: besides the control characters JSON escapes anyway,
DEL, C1 controls, format characters, line/paragraph separators and lone surrogates (undecodable host bytes) are
written as ``\\uXXXX`` escapes, which read back as the same strings."""

from __future__ import annotations

import json
import re
from dataclasses import asdict
from typing import Any, ClassVar

from tuner.emit import host as host_emit
from tuner.emit import query_lines, quote, sql, wording
from tuner.report.model import Report

RENDERED_KEYS = ("apply_sql", "rollback_sql", "host", "not_rendered")
# The report's own rendered lines (tuner.emit.wording), beside its data: what "improvement" is a ratio of, where
# a change goes; what each query gains (the effects' per-query lines joined with the queries' names and shares)
# and the statements left out.
RENDERED_TOP = ("improvement_of", "apply_where", "per_query", "left_out_lines")
_RAW = re.compile("[\x7f-\U0010ffff]")


def to_dict(report: Report) -> dict[str, Any]:
    data = report.model_dump(mode="json")
    for rec, out in zip(report.recommendations, data["recommendations"], strict=True):
        host = host_emit.commands(rec)
        out["apply_sql"] = sql.apply_sql(rec)
        out["rollback_sql"] = sql.rollback_sql(rec)
        out["host"] = None if host is None else host.model_dump(mode="json")
        out["not_rendered"] = sql.not_rendered(rec)
    data["improvement_of"] = wording.improvement_of(report)
    data["apply_where"] = wording.apply_where(report)
    data["per_query"] = per_query(report)
    data["left_out_lines"] = [query_lines.left_out(s) for s in report.left_out]
    return data


def per_query(report: Report) -> list[dict[str, Any]]:
    """The per-query lines of each confirmed effect (:func:`tuner.emit.query_lines.groups`) as JSON."""
    return [{"title": g.title, "queries": [{**asdict(q), "ci95": list(q.ci95)} for q in g.lines]}
            for g in query_lines.groups(report)]


def to_json(report: Report) -> str:
    text = json.dumps(to_dict(report), indent=2, ensure_ascii=False)
    return _RAW.sub(lambda m: _u_escape(m.group()) if quote.unsafe(m.group()) else m.group(), text) + "\n"


def _u_escape(ch: str) -> str:
    """``ch`` as JSON ``\\uXXXX`` escapes (a surrogate pair above U+FFFF). Such characters only occur inside
    JSON strings, where the escape means the same character."""
    return json.dumps(ch)[1:-1] if ord(ch) > 0xFFFF else f"\\u{ord(ch):04x}"


def parse(text: str) -> Report:
    """A report written by :func:`to_json`, back as data (the rendered keys are recomputed, not stored)."""
    data = json.loads(text)
    for key in RENDERED_TOP:
        data.pop(key, None)
    for rec in data.get("recommendations", []):
        for key in RENDERED_KEYS:
            rec.pop(key, None)
    return Report.model_validate(data)


class JsonReport:
    name: ClassVar[str] = "json"
    stdout: ClassVar[bool] = True

    def render(self, report: Report) -> dict[str, str]:
        return {"report.json": to_json(report)}
