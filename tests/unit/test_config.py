from __future__ import annotations

import asyncio
import os
import re
import urllib.parse
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from tuner.settings.config import Config, state_dir
from tuner.settings.config_load import env_overrides, load_config
from tuner.errors import ConfigError
from tuner.target.connection import connect, to_uri

FIXTURES = Path(__file__).parent.parent / "fixtures" / "configs"


def test_defaults_without_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = load_config(environ={})
    assert cfg.tuner.policy == "default"
    assert cfg.sandbox.scale == 50
    assert cfg.source is None


def test_the_sample_tuner_toml_is_the_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The repository's tuner.toml says its values are the defaults, and tuner reads it implicitly when run from
    the repository's root: a default changed without the sample (or the reverse) would change a session there."""
    sample = load_config(FIXTURES.parent.parent.parent / "tuner.toml", environ={})
    monkeypatch.chdir(tmp_path)
    assert sample.model_copy(update={"source": None}) == load_config(environ={})


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


# -- ./tuner.toml read implicitly as root ------------------------------------------------------------------------
HOSTILE = "[readahead]\nhelper_command = 'touch PWNED'\n"


def _implicit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Config, list[str]]:
    monkeypatch.chdir(tmp_path)
    warnings: list[str] = []
    return load_config(environ={}, warn=warnings.append), warnings


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (lambda p: os.chown(p, 65534, 65534), "owned by uid 65534, not root"),
        (lambda p: os.chmod(p, 0o664), "group or others may write it (mode 0664)"),
        (lambda p: os.chmod(p, 0o646), "group or others may write it (mode 0646)"),
    ],
    ids=["another-owner", "group-writable", "world-writable"],
)
def test_root_ignores_a_tuner_toml_it_does_not_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make: Any, why: str
) -> None:
    if os.geteuid() != 0:
        pytest.skip("the rule is root's")
    (tmp_path / "tuner.toml").write_text(HOSTILE)
    make(tmp_path / "tuner.toml")
    cfg, warnings = _implicit(tmp_path, monkeypatch)
    assert cfg.readahead.helper_command is None and cfg.source is None
    assert len(warnings) == 1 and why in warnings[0] and "--config ./tuner.toml" in warnings[0]


def test_root_ignores_a_tuner_toml_that_is_a_link(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if os.geteuid() != 0:
        pytest.skip("the rule is root's")
    (tmp_path / "elsewhere.toml").write_text(HOSTILE)
    (tmp_path / "tuner.toml").symlink_to(tmp_path / "elsewhere.toml")
    cfg, warnings = _implicit(tmp_path, monkeypatch)
    assert cfg.readahead.helper_command is None and "symbolic link" in warnings[0]


def test_root_reads_its_own_tuner_toml_and_any_named_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if os.geteuid() != 0:
        pytest.skip("the rule is root's")
    (tmp_path / "tuner.toml").write_text(HOSTILE)
    os.chmod(tmp_path / "tuner.toml", 0o644)
    cfg, warnings = _implicit(tmp_path, monkeypatch)
    assert cfg.readahead.helper_command == "touch PWNED" and not warnings
    os.chown(tmp_path / "tuner.toml", 65534, 65534)
    named = load_config(tmp_path / "tuner.toml", environ={}, warn=warnings.append)  # --config: the user's choice
    assert named.readahead.helper_command == "touch PWNED" and not warnings


def test_other_users_read_tuner_toml_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "tuner.toml").write_text(HOSTILE)
    if os.geteuid() == 0:
        os.chown(tmp_path / "tuner.toml", 65534, 65534)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    cfg, warnings = _implicit(tmp_path, monkeypatch)
    assert cfg.readahead.helper_command == "touch PWNED" and not warnings


# -- bounds ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        ("[target]\nconnect_timeout_s = inf", "finite number"),
        ("[target]\nconnect_timeout_s = nan", "finite number"),
        ("[target]\nconnect_timeout_s = 1e308", "less than or equal to 3600"),
        ("[target]\nconnect_timeout_s = -1", "greater than 0"),
        ("[tuner]\nseed = -1", "greater than or equal to 0"),
        ("[tuner]\nseed = 4294967296", "less than or equal to 4294967295"),
        ("[workload]\npages_fraction = -inf", "finite number"),
        ("[tuner]\npolicy = \"a\\u0000b\"", "NUL character"),
    ],
)
def test_numbers_and_strings_have_bounds(tmp_path: Path, toml: str, expected: str) -> None:
    f = tmp_path / "tuner.toml"
    f.write_text(toml + "\n")
    with pytest.raises(ConfigError, match=re.escape(expected)):
        load_config(f, environ={})


def test_the_bounds_themselves_are_valid(tmp_path: Path) -> None:
    f = tmp_path / "tuner.toml"
    for toml in ("[tuner]\nseed = 0", "[tuner]\nseed = 4294967295", "[target]\nconnect_timeout_s = 3600"):
        f.write_text(toml + "\n")
        load_config(f, environ={})


def test_an_error_names_the_layer_that_set_the_value(tmp_path: Path) -> None:
    f = tmp_path / "tuner.toml"
    f.write_text("[sandbox]\nscale = 0\n")
    with pytest.raises(ConfigError, match=r"^.*tuner\.toml: \[sandbox\] scale"):
        load_config(f, environ={})
    with pytest.raises(ConfigError, match=r"^TUNER_SANDBOX__SCALE: \[sandbox\] scale"):
        load_config(environ={"TUNER_SANDBOX__SCALE": "0"})
    with pytest.raises(ConfigError, match=r"^the command line: \[sandbox\] scale"):
        load_config(f, environ={"TUNER_SANDBOX__SCALE": "5"}, overrides={"sandbox": {"scale": -1}})


@pytest.mark.parametrize("name", ["TUNER_TARGET__DSN__X", "TUNER___", "TUNER_TARGET__", "TUNER_1__X"])
def test_a_malformed_variable_name_is_one_sentence(name: str) -> None:
    with pytest.raises(ConfigError, match=f"the environment variable {name} does not name a setting"):
        load_config(environ={name: "1"})


# -- reading files -----------------------------------------------------------------------------------------------
def test_unreadable_kinds_of_file_are_one_sentence(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo.toml")  # must not hang
    (tmp_path / "big.toml").write_text("# " + "x" * (2 << 20))
    (tmp_path / "binary.toml").write_bytes(b"\x7fELF" + bytes(range(256)))
    (tmp_path / "half.toml").write_text('[target]\ndsn = "host=')
    for path, expected in [
        (Path("/etc/passwd/x"), "a part of the path is a file"),
        (tmp_path / "fifo.toml", "not a regular file"),
        (Path("/dev/zero"), "not a regular file"),
        (tmp_path / "big.toml", "larger than 1024 KiB"),
        (tmp_path / "binary.toml", "not UTF-8 text"),
        (tmp_path / "half.toml", "invalid TOML"),
    ]:
        with pytest.raises(ConfigError, match=re.escape(expected)):
            load_config(path, environ={})


def test_state_dir_under_a_file_is_bad_input(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    cfg = load_config(environ={}, overrides={"tuner": {"state_dir": "relative/dir"}})
    assert state_dir(cfg) == Path("relative/dir")
    with pytest.raises(ConfigError, match="is a file, not a directory"):
        load_config(environ={}, overrides={"tuner": {"state_dir": str(tmp_path / "f" / "journal")}})


# -- DSNs ----------------------------------------------------------------------------------------------------------
SECRET = "pw-Hunter2-x9"


@pytest.mark.parametrize(
    ("dsn", "expected"),
    [
        # libpq's own messages (tuner.target.conninfo), every quoted fragment but a keyword name hidden.
        (f"=== password={SECRET}", 'libpq says invalid connection option "…"'),
        (f"host=x password={SECRET} more", 'libpq says missing "=" after "…"'),
        (f"host=x password='{SECRET}", "libpq says unterminated quoted string"),
        (f"host=x password={SECRET} keepalives=1", "uses 'keepalives'"),
        (f"host=x password={SECRET} {SECRET.replace('-', '_')}=1", 'libpq says invalid connection option "…"'),
        (f"host=x port=5432x password={SECRET}", "port that is not a number"),
        (f"postgresql://u:{SECRET}@h:0/db", "port that is not a number"),
        (f"postgresql://u:{SECRET}@h/db?{SECRET}", 'missing key/value separator "=" in URI query parameter: "…"'),
        (f"postgresql://u:{SECRET}@h/db?keepalives_idle=5", "uses 'keepalives_idle'"),
    ],
)
def test_a_bad_dsn_says_where_never_what(dsn: str, expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        to_uri(dsn)
    assert expected in str(err.value)
    assert SECRET not in str(err.value) and SECRET.replace("-", "_") not in str(err.value) + (err.value.hint or "")


def test_dsn_forms_become_one_uri_with_what_asyncpg_supports() -> None:
    uri = to_uri("host=/a,/b port=5432,5433 dbname='my db' user=u password='it\\'s x' options='-c work_mem=4MB' "
                 "connect_timeout=3 application_name=x sslmode=disable target_session_attrs=standby")
    params = urllib.parse.parse_qs(urllib.parse.urlsplit(uri).query)
    assert params == {"host": ["/a,/b"], "port": ["5432,5433"], "dbname": ["my db"], "user": ["u"],
                      "password": ["it's x"], "options": ["-c work_mem=4MB"], "sslmode": ["disable"],
                      "target_session_attrs": ["standby"]}
    # One form for asyncpg whatever the DSN's: every keyword a query parameter.
    assert to_uri("postgresql://u@h/db?connect_timeout=3&sslmode=disable") == \
        "postgresql://?user=u&dbname=db&host=h&sslmode=disable"


def _asyncpg_parse(uri: str, session_attrs: str | None) -> Any:
    from asyncpg import connect_utils

    addrs, params = connect_utils._parse_connect_dsn_and_args(
        dsn=uri, host=None, port=None, user=None, password=None, passfile=None, database=None, ssl=None,
        service=None, servicefile=None, direct_tls=None, server_settings=None, target_session_attrs=session_attrs,
        krbsrvname=None, gsslib=None)
    return addrs, params


@pytest.mark.parametrize(
    "dsn",
    ["host=/s1,/s2 port=5432,5433 dbname=app target_session_attrs=read-write",
     "postgresql:///app?host=/s1,/s2&port=5432,5433&target_session_attrs=read-write"],
    ids=["keywords", "uri"],
)
def test_session_attrs_overrides_the_dsn(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGTARGETSESSIONATTRS", "primary")
    seen: list[dict[str, Any]] = []

    async def fake_connect(uri: str, **kwargs: Any) -> None:
        seen.append({"uri": uri, **kwargs})

    monkeypatch.setattr(asyncpg, "connect", fake_connect)
    asyncio.run(connect(dsn, session_attrs="standby"))
    asyncio.run(connect(dsn))
    assert [s["target_session_attrs"] for s in seen] == ["standby", None]
    addrs, params = _asyncpg_parse(seen[0]["uri"], "standby")  # what asyncpg makes of it
    assert addrs == ["/s1/.s.PGSQL.5432", "/s2/.s.PGSQL.5433"] and params.target_session_attrs == "standby"
    assert _asyncpg_parse(seen[1]["uri"], None)[1].target_session_attrs == "read-write"
    with pytest.raises(ValueError, match="session_attrs must be one of"):
        asyncio.run(connect(dsn, session_attrs="replica"))
