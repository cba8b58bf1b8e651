from __future__ import annotations

import pytest

from tuner.errors import RefusedError
from tuner.target.facts import TargetFacts
from tuner.target.interlock import check


def facts(**over: object) -> TargetFacts:
    base: dict[str, object] = dict(
        server_version_num=150018, server_version="15.18", in_recovery=False, database="app", user="tuner",
        is_superuser=True, can_read_all_settings=True, data_directory="/srv/pg", system_identifier="1",
        staging_marker=None, marker_source=None, server_addr=None, settings={}, tablespaces=(),
    )
    base.update(over)
    return TargetFacts(**base)  # type: ignore[arg-type]


def test_hot_standby_is_cleared() -> None:
    assert check(facts(in_recovery=True)).mode == "hot_standby"


def test_marked_writable_clone_is_cleared() -> None:
    c = check(facts(staging_marker="staging", marker_source="/etc/postgresql/15/main/conf.d/tuner.conf:1",
                    marker_setting_source="configuration file"))
    assert c.mode == "staging_clone"
    assert "tuner.conf:1" in c.reason


def test_primary_without_marker_is_refused_with_how_to_mark_it() -> None:
    with pytest.raises(RefusedError) as err:
        check(facts())
    assert "primary" in str(err.value)
    assert "tuner.role = 'staging'" in (err.value.hint or "")
    assert err.value.exit_code == 3


def test_other_marker_values_are_refused() -> None:
    with pytest.raises(RefusedError, match="'production'"):
        check(facts(staging_marker="production"))


def test_marker_set_only_by_the_client_is_refused() -> None:
    with pytest.raises(RefusedError, match="connection's own options"):
        check(facts(staging_marker="staging", marker_setting_source="elsewhere"))


@pytest.mark.parametrize("source", ["elsewhere", None])
def test_a_marker_that_does_not_come_from_a_configuration_file_is_refused(source: str | None) -> None:
    # ALTER DATABASE/ROLE ... SET replicate to the primary: a marker set that way would clear the primary too.
    with pytest.raises(RefusedError, match="does not come from a configuration file"):
        check(facts(staging_marker="staging", marker_setting_source=source))


def test_a_role_that_cannot_see_where_the_marker_comes_from_is_told_what_to_grant() -> None:
    with pytest.raises(RefusedError, match="may not read pg_file_settings") as err:
        check(facts(staging_marker="staging", marker_setting_source="hidden", user="app"))
    assert err.value.hint == "GRANT pg_read_all_settings TO app; (or connect as a superuser)"
