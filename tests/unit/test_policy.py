from __future__ import annotations

from pathlib import Path

import pytest
from structlog.testing import capture_logs

from tuner.core.decide import confirmation_test
from tuner.errors import ConfigError
from tuner.settings.policy import DEPRECATED, SHIPPED_POLICY_DIR, find_policy, load_policy

FIXTURES = Path(__file__).parent.parent / "fixtures" / "policies"


@pytest.mark.parametrize("name", ["default", "ssd", "network", "hdd"])
def test_shipped_policies_load(name: str) -> None:
    assert load_policy(name).policy.name == name


@pytest.mark.parametrize("name", ["default", "ssd", "network", "hdd"])
def test_shipped_policies_confirm_longer_in_the_daemon(name: str) -> None:
    policy = load_policy(name)
    daemon = confirmation_test(policy.for_daemon())
    assert daemon.max_pairs > confirmation_test(policy).max_pairs
    assert daemon.looks == [policy.daemon.confirm_min_pairs, *policy.daemon.confirm_looks, policy.daemon.confirm_max_pairs]


def test_every_shipped_policy_file_is_valid() -> None:
    files = sorted(SHIPPED_POLICY_DIR.glob("*.toml"))
    assert len(files) >= 4
    for f in files:
        load_policy(str(f))


@pytest.mark.parametrize("path", sorted((FIXTURES / "good").glob("*.toml")), ids=lambda p: p.name)
def test_good_policies_validate(path: Path) -> None:
    load_policy(str(path))


@pytest.mark.parametrize("path", sorted((FIXTURES / "bad").glob("*.toml")), ids=lambda p: p.name)
def test_bad_policies_fail_with_one_sentence(path: Path) -> None:
    expected = path.read_text().splitlines()[0].removeprefix("# expect: ").strip()
    with pytest.raises(ConfigError) as err:
        load_policy(str(path))
    assert expected in str(err.value)
    assert "\n" not in str(err.value)


def test_unknown_policy_name_lists_the_available_ones() -> None:
    with pytest.raises(ConfigError) as err:
        find_policy("nvme-turbo")
    assert "default" in (err.value.hint or "")


def test_policy_next_to_the_config_wins(tmp_path: Path) -> None:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "default.toml").write_text((FIXTURES / "good" / "narrow_linear.toml").read_text())
    assert load_policy("default", config_dir=tmp_path).policy.name == "narrow"


def test_a_policy_with_the_deprecated_keys_loads_and_says_what_to_do() -> None:
    with capture_logs() as logs:
        policy = load_policy(str(FIXTURES / "good" / "deprecated_keys.toml"))
    assert policy.policy.name == "older"
    warned = {e["key"]: e for e in logs if e["event"] == "policy.deprecated_key"}
    assert set(warned) == {"[policy] storage_class", "[objective]"}
    for key, entry in warned.items():
        assert entry["log_level"] == "warning" and entry["hint"] == DEPRECATED[key]
        assert entry["policy"].endswith("deprecated_keys.toml")


@pytest.mark.parametrize("name", ["default", "ssd", "network", "hdd"])
def test_shipped_policies_carry_no_deprecated_key(name: str) -> None:
    with capture_logs() as logs:
        load_policy(name)
    assert not [e for e in logs if e["event"] == "policy.deprecated_key"]
