"""Connection strings read with libpq's own rules (tuner/target/conninfo.py): both forms parsed by libpq, services
expanded as libpq looks them up, libpq-only environment variables counted, each keyword then passed, accepted
where asyncpg does the same anyway, translated (hostaddr) or refused in one sentence naming it — and no error
ever shows a password, whatever libpq's own message quotes."""

from __future__ import annotations

import urllib.parse
from pathlib import Path

import pytest

from tuner.errors import ConfigError
from tuner.target.conninfo import for_asyncpg, resolve, scrub
from tuner.target.connection import to_uri
from tuner.target.pgoptions import client_options

SECRET = "pw-Hunter2-x9"


def query(dsn: str, environ: dict[str, str] | None = None) -> dict[str, str]:
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(to_uri(dsn, environ or {})).query))


def refused(dsn: str, environ: dict[str, str] | None = None) -> ConfigError:
    with pytest.raises(ConfigError) as err:
        to_uri(dsn, environ or {})
    text = f"{err.value} {err.value.hint}"
    assert SECRET not in text and SECRET.replace("-", "_") not in text, text
    return err.value


def test_both_forms_mean_what_they_mean_to_libpq() -> None:
    assert query(f"host=x port=5432 dbname='my db' password='{SECRET}\\'s'") == {
        "host": "x", "port": "5432", "dbname": "my db", "password": f"{SECRET}'s"}
    # A URI's percent-encoding, and a host list whose second host has no port: libpq's default port there.
    assert query(f"postgresql://u:{SECRET}%40x@h1:5433,h2/db?sslmode=require") == {
        "user": "u", "password": f"{SECRET}@x", "dbname": "db", "host": "h1,h2", "port": "5433,5432",
        "sslmode": "require"}
    assert query("postgresql://h1:5433,h2/db", {"PGPORT": "6000"})["port"] == "5433,6000"


@pytest.mark.parametrize("dsn", [
    f"host=x password={SECRET} keepalives=0 keepalives_idle=5 keepalives_count=3",
    f"host=x password={SECRET} client_encoding=UTF8 gssencmode=prefer channel_binding=prefer",
    f"host=x password={SECRET} sslsni=1 load_balance_hosts=disable tcp_user_timeout=0 connect_timeout=3",
])
def test_libpq_keywords_that_ask_for_what_asyncpg_does_anyway_are_accepted(dsn: str) -> None:
    assert query(dsn) == {"host": "x", "password": SECRET}


@pytest.mark.parametrize(("dsn", "keyword"), [
    (f"host=x password={SECRET} keepalives=1", "'keepalives' = '1'"),
    (f"host=x password={SECRET} keepalives_idle=30", "'keepalives_idle'"),
    (f"host=x password={SECRET} require_auth=scram-sha-256", "'require_auth'"),
    (f"host=x password={SECRET} channel_binding=require", "'channel_binding' = 'require'"),
    (f"host=x password={SECRET} client_encoding=LATIN1", "'client_encoding' = 'LATIN1'"),
    (f"postgresql://u:{SECRET}@h/db?load_balance_hosts=random", "'load_balance_hosts' = 'random'"),
    (f"host=x hostaddr=10.0.0.1 password={SECRET}", "'hostaddr' beside 'host'"),
])
def test_what_asyncpg_cannot_honour_is_refused_in_one_sentence_naming_the_keyword(dsn: str, keyword: str) -> None:
    err = refused(dsn)
    assert keyword in str(err) and "asyncpg" in str(err) and "\n" not in str(err)


def test_hostaddr_alone_is_the_host_asyncpg_connects_to() -> None:
    assert query(f"hostaddr=127.0.0.1 port=5433 password={SECRET}")["host"] == "127.0.0.1"
    assert "'hostaddr'" in str(refused("hostaddr=127.0.0.1", {"PGHOST": "db1"}))


@pytest.mark.parametrize("dsn", [
    f"host=x password={SECRET} more",
    f"host=x password='{SECRET}",
    f"host=x password={SECRET} {SECRET.replace('-', '_')}=1",
    f"postgresql://u:{SECRET}@[::1/db",
    f"postgresql://u:{SECRET}@h/db?{SECRET}",
    f"postgresql://u:{SECRET}@h/db?{SECRET}=1",
])
def test_libpqs_own_parse_errors_never_show_the_password(dsn: str) -> None:
    err = refused(dsn)
    assert str(err).startswith("the connection string cannot be parsed: libpq says "), err


def test_scrub_keeps_keyword_names_and_punctuation_only() -> None:
    assert scrub('invalid connection option "keepalives"\n') == 'invalid connection option "keepalives"'
    assert scrub(f'missing "=" after "{SECRET}" in connection info string') == \
        'missing "=" after "…" in connection info string'


def test_a_service_is_expanded_as_libpq_does_and_the_dsn_wins(tmp_path: Path) -> None:
    services = tmp_path / "pg_service.conf"
    services.write_text("# staging\n[other]\nhost=/elsewhere\n\n[app]\nhost=/run/pg\nport=5433\ndbname=app\n"
                        "keepalives=0\n[last]\nhost=/last\n")
    env = {"PGSERVICEFILE": str(services)}
    assert query("service=app user=u dbname=mine", env) == {"host": "/run/pg", "port": "5433", "dbname": "mine",
                                                             "user": "u"}
    assert query("", {**env, "PGSERVICE": "app"})["host"] == "/run/pg"  # PGSERVICE, no DSN


def test_a_service_file_is_held_to_the_same_rule(tmp_path: Path) -> None:
    services = tmp_path / "pg_service.conf"
    services.write_text(f"[app]\nhost=h\npassword={SECRET}\nrequire_auth=scram-sha-256\n[bad]\nhost=h\n{SECRET}\n")
    env = {"PGSERVICEFILE": str(services)}
    assert "'require_auth'" in str(refused("service=app", env))
    assert "syntax error at line 7" in str(refused("service=bad", env))
    assert "service 'nowhere'" in str(refused("service=nowhere", {**env, "PGSYSCONFDIR": str(tmp_path / "none")}))


def test_libpq_only_environment_variables_count_below_the_dsn() -> None:
    assert "'require_auth'" in str(refused("host=x", {"PGREQUIREAUTH": "scram-sha-256"}))
    assert query("dbname=app", {"PGHOSTADDR": "127.0.0.1"})["host"] == "127.0.0.1"
    assert query("host=x", {"PGCLIENTENCODING": "UTF8", "PGCONNECT_TIMEOUT": "3"}) == {"host": "x"}
    # Variables asyncpg reads itself are left to it.
    assert query("dbname=app", {"PGHOST": "db1", "PGUSER": "u"}) == {"dbname": "app"}


def test_the_interlocks_options_reading_still_sees_the_options_in_either_form() -> None:
    assert client_options("host=x options='-c tuner.role=staging'", {}).strip() == "-c tuner.role=staging"
    assert client_options("postgresql://h/db?options=-c%20tuner.r%5Cole%3Dstaging", {}).strip() == \
        "-c tuner.r\\ole=staging"


def test_the_result_is_one_asyncpg_reads() -> None:
    from asyncpg import connect_utils

    uri = to_uri(f"postgresql://u:{SECRET}@h1:5433,h2/db?sslmode=disable&keepalives=0", {})
    addrs, params = connect_utils._parse_connect_dsn_and_args(
        dsn=uri, host=None, port=None, user=None, password=None, passfile=None, database=None, ssl=None,
        service=None, servicefile=None, direct_tls=None, server_settings=None, target_session_attrs=None,
        krbsrvname=None, gsslib=None)
    assert addrs == [("h1", 5433), ("h2", 5432)] and params.user == "u" and params.database == "db"
    assert params.password == SECRET


def test_tuners_own_settings_give_way() -> None:
    assert dict(for_asyncpg(resolve("host=x application_name=y dbname=z connect_timeout=3", {}), {})) == {
        "host": "x", "dbname": "z"}
