from __future__ import annotations

from pathlib import Path

import pytest

from tuner.config import env_overrides, load_config
from tuner.errors import ConfigError

FIXTURES = Path(__file__).parent.parent / "fixtures" / "configs"


def test_defaults_without_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = load_config(environ={})
    assert cfg.tuner.policy == "default"
    assert cfg.sandbox.scale == 50
    assert cfg.source is None


def test_environment_beats_file_and_flags_beat_environment(tmp_path: Path) -> None:
    f = tmp_path / "tuner.toml"
    f.write_text('[target]\ndsn = "host=from-file"\n[sandbox]\nscale = 5\n')
    cfg = load_config(f, environ={"TUNER_TARGET__DSN": "host=from-env", "TUNER_SANDBOX__SCALE": "7"})
    assert cfg.target.dsn == "host=from-env"
    assert cfg.sandbox.scale == 7
    cfg = load_config(f, environ={"TUNER_TARGET__DSN": "host=from-env"}, overrides={"target": {"dsn": "host=flag"}})
    assert cfg.target.dsn == "host=flag"


def test_environment_values_parse_as_toml_literals() -> None:
    env = env_overrides({"TUNER_TUNER__FAMILIES": '["concurrency"]', "TUNER_SANDBOX__KEEP": "true", "OTHER": "x"})
    assert env == {"tuner": {"families": ["concurrency"]}, "sandbox": {"keep": True}}


@pytest.mark.parametrize("path", sorted((FIXTURES / "good").glob("*.toml")), ids=lambda p: p.name)
def test_good_configs_validate(path: Path) -> None:
    load_config(path, environ={})


@pytest.mark.parametrize("path", sorted((FIXTURES / "bad").glob("*.toml")), ids=lambda p: p.name)
def test_bad_configs_fail_with_one_line_naming_the_problem(path: Path) -> None:
    expected = path.read_text().splitlines()[0].removeprefix("# expect: ").strip()
    with pytest.raises(ConfigError) as err:
        load_config(path, environ={})
    message = str(err.value)
    assert "\n" not in message
    assert expected in message


def test_unknown_key_is_named(tmp_path: Path) -> None:
    f = tmp_path / "tuner.toml"
    f.write_text("[target]\ndns = 'host=x'\n")
    with pytest.raises(ConfigError, match=r"\[target\] dns: unknown key"):
        load_config(f, environ={})


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "absent.toml", environ={})
