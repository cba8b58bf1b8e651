"""The metric names that the shipped Prometheus rules and Grafana dashboard query (examples/), for the tests that
hold them to what the daemon exports."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from prometheus_client.parser import text_string_to_metric_families

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RULES = EXAMPLES / "prometheus-rules.yml"
DASHBOARD = EXAMPLES / "grafana-dashboard.json"
# Series Prometheus makes itself for every scrape target; the daemon cannot export them.
SCRAPE_SERIES = frozenset({"up", "scrape_duration_seconds", "scrape_samples_scraped"})

_KEYWORDS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool", "and", "or",
                       "unless", "inf", "nan"})
_LABEL_LIST = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression (or a Grafana ``label_values(SELECTOR, label)``) selects."""
    expr = re.sub(r"label_values\(([^,]*),[^)]*\)", r"(\1)", expr)
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings (label values, $variables)
    expr = re.sub(r"\{[^}]*\}", " ", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", " ", expr)  # ranges
    expr = _LABEL_LIST.sub(" ", expr)
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", expr):
        rest = expr[m.end():].lstrip()
        if rest.startswith("(") or m.group().lower() in _KEYWORDS:
            continue  # a function or a keyword
        if m.start() > 0 and (expr[m.start() - 1].isdigit() or expr[m.start() - 1] == "."):
            continue  # the unit of a number (1e3) or a duration's
        names.add(m.group())
    return names


def rule_exprs(rules: Path = RULES) -> list[str]:
    doc = yaml.safe_load(rules.read_text())
    return [r["expr"] for g in doc["groups"] for r in g["rules"]]


def dashboard_exprs(dashboard: Path = DASHBOARD) -> list[str]:
    doc = json.loads(dashboard.read_text())
    exprs = [t["expr"] for p in _panels(doc) for t in p.get("targets", []) if t.get("expr")]
    for v in doc.get("templating", {}).get("list", []):
        q = v.get("query")
        if v.get("type") == "query":
            exprs.append(q["query"] if isinstance(q, dict) else q)
    return exprs


def _panels(doc: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for p in doc.get("panels", []):
        out.append(p)
        out.extend(p.get("panels", []))  # rows hold their panels
    return out


def exported(metrics_text: str) -> set[str]:
    """Every name a /metrics text offers to a query: the families and their samples (``tuner_runs`` is a counter
    whose series are ``tuner_runs_total``)."""
    names = set()
    for fam in text_string_to_metric_families(metrics_text):
        names.add(fam.name)
        if fam.type == "counter":
            names.add(fam.name + "_total")
        names.update(s.name for s in fam.samples)
    return names


def unknown(metrics_text: str, exprs: list[str]) -> set[str]:
    """The names the expressions query that neither the daemon exports nor Prometheus makes."""
    have = exported(metrics_text) | SCRAPE_SERIES
    return {n for e in exprs for n in metric_names(e)} - have
