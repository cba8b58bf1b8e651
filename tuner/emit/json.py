"""The machine-readable report (schema_version 1). Recommendations are data; the statements that apply and roll
them back (``apply_sql``, ``rollback_sql``, ``host``) are computed here, when the report is written, so a
consumer finds them next to their evidence."""

from __future__ import annotations

import json
from typing import Any, ClassVar

from tuner.emit import host as host_emit
from tuner.emit import sql
from tuner.model import Report

RENDERED_KEYS = ("apply_sql", "rollback_sql", "host")


def to_dict(report: Report) -> dict[str, Any]:
    data = report.model_dump(mode="json")
    for rec, out in zip(report.recommendations, data["recommendations"], strict=True):
        host = host_emit.commands(rec)
        out["apply_sql"] = sql.apply_sql(rec)
        out["rollback_sql"] = sql.rollback_sql(rec)
        out["host"] = None if host is None else host.model_dump(mode="json")
    return data


def to_json(report: Report) -> str:
    return json.dumps(to_dict(report), indent=2, ensure_ascii=False) + "\n"


def parse(text: str) -> Report:
    """A report written by :func:`to_json`, back as data (the rendered keys are recomputed, not stored)."""
    data = json.loads(text)
    for rec in data.get("recommendations", []):
        for key in RENDERED_KEYS:
            rec.pop(key, None)
    return Report.model_validate(data)


class JsonReport:
    name: ClassVar[str] = "json"
    stdout: ClassVar[bool] = True

    def render(self, report: Report) -> dict[str, str]:
        return {"report.json": to_json(report)}
