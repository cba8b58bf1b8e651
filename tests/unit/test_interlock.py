from __future__ import annotations

import pytest

from tuner.errors import RefusedError
from tuner.target.facts import TargetFacts
from tuner.target.interlock import check, client_sets_marker


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
    assert err.value.hint == ("GRANT SELECT ON pg_file_settings TO app; GRANT EXECUTE ON FUNCTION "
                              "pg_show_all_file_settings(), pg_stat_file(text, boolean), pg_read_file(text, bigint, "
                              "bigint, boolean) TO app; GRANT pg_read_server_files TO app; (or connect as a superuser)")


STAGING = dict(staging_marker="staging", marker_setting_source="configuration file")


def test_marker_set_by_the_dsn_or_pgoptions_is_refused() -> None:
    with pytest.raises(RefusedError, match="this connection's own options"):
        check(facts(**STAGING), client_sets_marker=True)


@pytest.mark.parametrize("dsn, env, sets", [
    ("host=x options='-c tuner.role=staging'", {}, True),
    ("postgresql://u@h/db?tuner.role=staging", {}, True),
    ("postgresql://u@h/db?tun%65r.role=staging", {}, True),
    ("postgresql://u@h/db?options=-c%20TUNER.ROLE%3Dstaging", {}, True),
    (None, {"PGOPTIONS": "-c tuner.role=staging"}, True),
    ("host=x dbname=app", {}, False),
])
def test_a_client_that_sets_the_marker_itself_is_recognised(dsn: str | None, env: dict[str, str], sets: bool) -> None:
    assert client_sets_marker(dsn, env) is sets


def test_a_marker_in_database_or_role_settings_is_refused() -> None:
    with pytest.raises(RefusedError, match="ALTER DATABASE/ROLE"):
        check(facts(**STAGING, marker_in_role_settings=True))


def test_a_writable_server_that_standbys_follow_is_a_primary() -> None:
    with pytest.raises(RefusedError, match="2 standby\\(s\\) stream WAL from it"):
        check(facts(**STAGING, replicas=2))
    assert check(facts(**STAGING, replicas=1), allow_replicas=True).mode == "staging_clone"  # a sandbox's own


def test_a_marker_set_only_with_alter_system_is_refused() -> None:
    with pytest.raises(RefusedError, match="only with ALTER SYSTEM"):
        check(facts(staging_marker="staging", marker_setting_source="postgresql.auto.conf"))


# Issue 44, item 2: options are read as the server reads them (backslash escapes, -c / --name=value, any case).
@pytest.mark.parametrize("dsn, env", [
    ("host=x options='-c tuner.r\\\\ole=staging'", {}),  # libpq keeps one backslash, the server drops it
    ("host=x options='-ctuner.role=staging'", {}),
    ("host=x options='--tuner.role=staging'", {}),
    ("host=x options='-c Tuner.Role=staging'", {}),
    ("host=x options='-c tuner.other=1'", {}),  # any tuner.* setting is the client's own
    ("postgresql://u@h/db?options=-c%20tuner.r%5C%5Cole%3Dstaging", {}),
    (None, {"PGOPTIONS": "-c\\ tuner.r\\ole=staging"}),
    (None, {"PGOPTIONS": "--TUNER.ROLE=staging"}),
])
def test_an_escaped_or_cased_tuner_setting_in_options_is_the_clients(dsn: str | None, env: dict[str, str]) -> None:
    assert client_sets_marker(dsn, env) is True


def test_options_are_split_at_unescaped_space_with_escapes_removed() -> None:
    from tuner.target.pgoptions import split_options

    assert split_options("-c a=b\\ c  -c\\ d=e \\\\x ") == ["-c", "a=b c", "-c d=e", "\\x"]
    assert split_options("-c application_name=tuner_app") == ["-c", "application_name=tuner_app"]
    assert client_sets_marker("host=x options='-c application_name=app'", {}) is False


ON_DISK = {"setting": "staging", "sourcefile": "/etc/pg/postgresql.conf", "sourceline": 12, "applied": True,
           "changed_since_load": False}
ARGV = '/usr/lib/postgresql/15/bin/postgres "-D" "/srv/pg" "-p" "5432"'


@pytest.mark.parametrize("value, on_disk, argv, hidden, origin", [
    ("staging", ON_DISK, ARGV, False, "configuration file"),
    ("staging", {**ON_DISK, "setting": "production"}, ARGV, False, "elsewhere"),  # client options or role settings
    ("staging", None, ARGV, False, "elsewhere"),  # no file sets it
    ("staging", {**ON_DISK, "applied": False}, ARGV, False, "elsewhere"),
    ("staging", ON_DISK, ARGV + ' "-c" "tuner.role=production"', False, "command line"),  # outranks the file
    ("staging", ON_DISK, ARGV + ' "--TUNER.ROLE=staging"', False, "command line"),
    ("staging", {**ON_DISK, "changed_since_load": True}, ARGV, False, "not reloaded"),  # edited, not reloaded
    ("staging", None, None, True, "hidden"),
    ("staging", ON_DISK, None, False, "hidden"),  # postmaster.opts unreadable
    ("staging", {**ON_DISK, "sourcefile": "/d/postgresql.auto.conf"}, ARGV, False, "postgresql.auto.conf"),
    (None, None, None, False, None),
])
def test_the_marker_comes_from_a_file_only_when_its_line_sets_it_and_nothing_outranks_it(
        value: str | None, on_disk: dict | None, argv: str | None, hidden: bool, origin: str | None) -> None:
    from tuner.target.facts import marker_origin

    assert marker_origin(value, on_disk, argv, hidden=hidden)[0] == origin


def test_a_marker_line_not_reloaded_is_refused_with_how_to_reload() -> None:
    with pytest.raises(RefusedError, match="not reloaded") as err:
        check(facts(staging_marker="staging", marker_setting_source="not reloaded"))
    assert "pg_reload_conf" in (err.value.hint or "")


def test_a_marker_on_the_servers_command_line_is_refused() -> None:
    with pytest.raises(RefusedError, match="command line sets tuner.role"):
        check(facts(staging_marker="staging", marker_setting_source="command line"))
