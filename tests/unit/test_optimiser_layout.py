"""The optimiser package's layout: the gap rules each a named unit with its constants and a one-line reason,
scikit-optimize behind one module, no module grown past what one reads at a sitting, and no benchmark
surface named in the code (the code says what shape a rule addresses; docs/ says where it was measured)."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

from tuner.optimiser import BayesianOptimiser, rules
from tuner.optimiser.rule_api import GapRule, Rule

ROOT = Path(__file__).resolve().parents[2]
TUNER = ROOT / "tuner"


def _rule_classes() -> list[type]:
    return [c for _, c in inspect.getmembers(rules, inspect.isclass)
            if c.__module__ == rules.__name__ and issubclass(c, Rule)]


def _constants(cls: type) -> dict[str, object]:
    """A rule's tunable constants (not the declarations every gap rule makes: where it applies)."""
    return {k: v for k, v in vars(cls).items()
            if not k.startswith("_") and k not in vars(GapRule) and isinstance(v, (bool, int, float))}


def test_every_rule_is_held_by_the_optimiser_and_gives_its_reason_in_one_line() -> None:
    from tuner.optimiser import Dimension

    classes = _rule_classes()
    assert len(classes) >= 9 and set(classes) == set(rules.RULES)
    opt = BayesianOptimiser(dimensions=[Dimension("x", 0, 256)], seed=0)
    for cls in classes:
        assert isinstance(opt.rule(cls), cls), f"{cls.__name__} is not held by BayesianOptimiser"
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
    half_step = opt.rule(rules.HalfStep)
    before = half_step.v_gain(opt, 64, 32, 128, 48, mu)
    half_step.v_floor = 10.0
    assert before > -1e9 and half_step.v_gain(opt, 64, 32, 128, 48, mu) == float("-inf")
    assert BayesianOptimiser(dimensions=[Dimension("x", 0, 256)], seed=0).rule(rules.HalfStep).v_floor == 2.0


def test_the_rules_are_objects_not_a_tower_of_base_classes() -> None:
    assert not [c for c in BayesianOptimiser.__mro__ if issubclass(c, Rule)]
    gaps = rules.GAP_RULES
    assert all(issubclass(g, GapRule) for g in gaps) and len(set(gaps)) == len(gaps)
    assert not [c for c in rules.RULES if issubclass(c, GapRule) and c not in gaps]


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
