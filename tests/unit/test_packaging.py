"""The wheel's contents as pyproject.toml declares them (issue #47 item 1); the built wheel itself is run in
tests/integration/test_wheel.py."""

from __future__ import annotations

import tomllib
from pathlib import Path

import tuner
from tuner.settings.policy import SHIPPED_POLICY_DIR
from tuner.cli.samples import SAMPLES, SAMPLES_DIR

ROOT = Path(__file__).resolve().parent.parent.parent
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_package_under_tuner_is_listed_for_the_wheel() -> None:
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "tuner").rglob("__init__.py")}
    assert set(SETUPTOOLS["packages"]) == found | {"tuner._policies", "tuner._examples"}


def test_the_wheel_maps_the_top_level_policies_into_the_package() -> None:
    assert SETUPTOOLS["package-dir"] == {"tuner._policies": "policies", "tuner._examples": "examples"}
    assert SETUPTOOLS["package-data"]["tuner._policies"] == ["*.toml"]


def test_a_source_checkout_finds_the_top_level_policies() -> None:
    assert not (Path(tuner.__file__).parent / "_policies").exists()  # else a checkout would read a stale copy
    assert SHIPPED_POLICY_DIR == ROOT / "policies"
    assert (SHIPPED_POLICY_DIR / "default.toml").is_file()


def test_the_sample_tuner_toml_in_examples_is_the_top_level_one() -> None:
    """examples/ is what the wheel carries (tuner init writes from it); the top-level tuner.toml is the one a
    checkout reads. One text, two places: they must not drift apart."""
    assert (ROOT / "examples" / "tuner.toml").read_text() == (ROOT / "tuner.toml").read_text()


def test_every_sample_tuner_init_writes_is_package_data() -> None:
    assert SAMPLES_DIR == ROOT / "examples"  # a checkout reads examples/ itself
    patterns = SETUPTOOLS["package-data"]["tuner._examples"]
    for sample in SAMPLES:
        assert (SAMPLES_DIR / sample.source).is_file(), sample.source
        assert any(Path(sample.source).match(p) for p in patterns), sample.source
    assert not (Path(tuner.__file__).parent / "_examples").exists()  # else a checkout would read a stale copy
