"""The optimiser package's layout: the gap rules each a named unit with its constants and a one-line reason,
scikit-optimize behind one module, no module grown past what one reads at a sitting, and no benchmark
surface named in the code (the code says what shape a rule addresses; docs/ says where it was measured)."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

from tuner.optimiser import BayesianOptimiser, rules

ROOT = Path(__file__).resolve().parents[2]
TUNER = ROOT / "tuner"


def _rule_classes() -> list[type]:
    return [c for _, c in inspect.getmembers(rules, inspect.isclass)
            if c.__module__ == rules.__name__ and issubclass(c, rules._Rule) and c is not rules._Rule]


def _constants(cls: type) -> dict[str, object]:
    return {k: v for k, v in vars(cls).items() if not k.startswith("_") and isinstance(v, (bool, int, float))}


def test_every_gap_rule_is_mixed_in_and_gives_its_reason_in_one_line() -> None:
    classes = _rule_classes()
    assert len(classes) >= 9
    for cls in classes:
        assert issubclass(BayesianOptimiser, cls), f"{cls.__name__} is not mixed into BayesianOptimiser"
        doc = (cls.__doc__ or "").strip()
        assert doc and "\n" not in doc, f"{cls.__name__}: the reason in one line, as its docstring"
        assert any(inspect.isfunction(v) and v.__doc__ for v in vars(cls).values()), f"{cls.__name__}: no rule"


def test_every_tunable_constant_belongs_to_exactly_one_rule() -> None:
    owners: dict[str, list[str]] = {}
    for cls in _rule_classes():
        for name in _constants(cls):
            owners.setdefault(name, []).append(cls.__name__)
    assert {n for n, o in owners.items() if len(o) > 1} == set()
    # BayesianOptimiser itself defines none: each lives with the rule it tunes ...
    assert _constants(BayesianOptimiser) == {}
    # ... and each is read by its rule's code (a constant nobody reads would tune nothing).
    for cls in _rule_classes():
        source = inspect.getsource(cls)
        for name in _constants(cls):
            assert f"self.{name}" in source, f"{cls.__name__}.{name} is not used by its rule"


def test_a_rule_constant_set_on_an_instance_changes_what_the_rule_does() -> None:
    from tuner.optimiser import Dimension

    opt = BayesianOptimiser(dimensions=[Dimension("x", 0, 256)], seed=0)
    mu = {64: 0.0, 32: 0.01, 128: 0.3}
    before = opt._v_gain(64, 32, 128, 48, mu)
    opt.v_floor = 10.0
    assert before > -1e9 and opt._v_gain(64, 32, 128, 48, mu) == float("-inf")


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module.split(".")[0])
    return out


def test_scikit_optimize_is_imported_in_exactly_one_module() -> None:
    importers = [p.relative_to(ROOT).as_posix() for p in sorted(TUNER.rglob("*.py")) if "skopt" in _imports(p)]
    assert importers == ["tuner/optimiser/gp.py"]


def test_no_optimiser_module_is_longer_than_400_lines() -> None:
    lengths = {p.name: len(p.read_text().splitlines()) for p in (TUNER / "optimiser").glob("*.py")}
    assert lengths and max(lengths.values()) <= 400, lengths


def _surface_ids() -> set[str]:
    """Every benchmark surface's name, and each dash-separated prefix of it that holds a digit (r12, h2d04,
    seed000, tps-peak64): the names a comment would cite."""
    ids: set[str] = set()
    for path in (ROOT / "benchmarks" / "surfaces").rglob("*.csv"):
        parts = path.stem.split("-")
        if len(parts) > 1:
            ids.add(path.stem)
        ids |= {"-".join(parts[: i + 1]) for i in range(len(parts)) if re.search(r"\d", parts[i])}
    return ids


def test_no_code_under_tuner_names_a_benchmark_surface() -> None:
    ids = _surface_ids()
    assert {"r12", "vee48", "r2d02", "h1f01", "seed000", "bimodal-2-128"} <= ids
    pattern = re.compile(r"(?<![\w-])(" + "|".join(sorted(map(re.escape, ids), key=len, reverse=True)) + r")(?![\w-])")
    hits = [f"{p.relative_to(ROOT)}:{n}: {m.group(1)}"
            for p in sorted(TUNER.rglob("*.py"))
            for n, line in enumerate(p.read_text().splitlines(), 1)
            for m in [pattern.search(line)] if m]
    assert hits == []
