"""The wheel's contents as pyproject.toml declares them (issue #47 item 1); the built wheel itself is run in
tests/integration/test_wheel.py."""

from __future__ import annotations

import tomllib
from pathlib import Path

import tuner
from tuner.policy import SHIPPED_POLICY_DIR

ROOT = Path(__file__).resolve().parent.parent.parent
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_package_under_tuner_is_listed_for_the_wheel() -> None:
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "tuner").rglob("__init__.py")}
    assert set(SETUPTOOLS["packages"]) == found | {"tuner._policies"}


def test_the_wheel_maps_the_top_level_policies_into_the_package() -> None:
    assert SETUPTOOLS["package-dir"] == {"tuner._policies": "policies"}
    assert SETUPTOOLS["package-data"]["tuner._policies"] == ["*.toml"]


def test_a_source_checkout_finds_the_top_level_policies() -> None:
    assert not (Path(tuner.__file__).parent / "_policies").exists()  # else a checkout would read a stale copy
    assert SHIPPED_POLICY_DIR == ROOT / "policies"
    assert (SHIPPED_POLICY_DIR / "default.toml").is_file()
