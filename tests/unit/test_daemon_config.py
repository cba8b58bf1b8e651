"""``[daemon]`` in tuner.toml and what ``tuner daemon --check-config`` checks beyond the schema: every bad value is
one sentence naming the key, and the daemon's targets, token file and store are what the file says."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from tuner.settings.config_load import load_config
from tuner.daemon.service import check, read_token, targets_of
from tuner.errors import ConfigError
from tuner.report.validate import check as report_check
from tuner.store import open_store

TOKEN = "0123456789abcdef0123456789abcdef"


def cfg_from(tmp_path: Path, text: str, **env: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "tuner.toml"
    path.write_text(text)
    return load_config(path, environ=env)


@pytest.mark.parametrize(("text", "said"), [
    ('[daemon]\nlisten = "0.0.0.0:8187"\n', "[daemon] listen: '0.0.0.0:8187' is not a loopback address: set token_file"),
    ('[daemon]\nlisten = "8187"\n', "'8187' is not HOST:PORT"),
    ('[daemon]\nlisten = "127.0.0.1:70000"\n', "is not HOST:PORT"),
    ('[daemon]\ndrift_check_every = "10 minutes please"\n', "[daemon] drift_check_every: "),
    ('[daemon]\nrevalidate_every = "-1d"\n', "is negative"),
    ('[daemon]\nschedule = "0 2 * *"\n', "needs 5 fields (minute hour day month weekday), it has 4"),
    ('[daemon]\nwindows = ["Sat 1-5"]\n', "is not a maintenance window"),
    ('[daemon]\nwindows = ["Xyz 01:00-02:00"]\n', "unknown day 'xyz'"),
    ('[[daemon.targets]]\nname = "Bad Name"\n', "[daemon] targets.0.name"),
    ('[[daemon.targets]]\nname = "a"\n[[daemon.targets]]\nname = "a"\n', "[daemon] targets: two [[daemon.targets]] share a name"),
    ('[[daemon.targets]]\nname = "a"\nfamilies = ["nope"]\n', "unknown family 'nope'"),
    ('[daemon]\nlisten_on = "x"\n', "[daemon] listen_on: unknown key"),
])
def test_bad_daemon_settings_are_one_sentence_naming_the_key(tmp_path: Path, text: str, said: str) -> None:
    with pytest.raises(ConfigError) as err:
        cfg_from(tmp_path, text)
    assert said in str(err.value) and "\n" not in str(err.value)


def test_defaults_are_a_loopback_read_only_daemon_with_a_weekly_session(tmp_path: Path) -> None:
    cfg = cfg_from(tmp_path, "")
    d = cfg.daemon
    assert (d.listen, d.token_file, str(d.schedule), d.windows.texts) == ("127.0.0.1:8187", None, "0 2 * * 6", ())
    assert (str(d.drift_check_every), str(d.revalidate_every)) == ("10m", "7d")
    assert (d.drift_check_every.delta, d.revalidate_every.delta) == (timedelta(minutes=10), timedelta(days=7))
    assert read_token(cfg) is None


def test_targets_are_target_as_default_then_the_named_ones(tmp_path: Path) -> None:
    cfg = cfg_from(tmp_path, '[target]\ndsn = "host=/tmp dbname=a"\n[tuner]\npolicy = "ssd"\n'
                             '[[daemon.targets]]\nname = "staging2"\ndsn = "host=/tmp dbname=b"\n'
                             'families = ["readahead"]\npolicy = "hdd"\n')
    targets = targets_of(cfg, sandbox=False)
    assert [t.name for t in targets] == ["default", "staging2"]
    assert targets[0].cfg.target.dsn == "host=/tmp dbname=a" and targets[0].cfg.tuner.policy == "ssd"
    assert targets[1].cfg.target.dsn == "host=/tmp dbname=b" and targets[1].cfg.tuner.families == ("readahead",)
    assert targets[1].cfg.tuner.policy == "hdd"
    assert [t.name for t in targets_of(cfg, sandbox=True)] == ["sandbox", "staging2"]


def test_no_target_at_all_is_one_sentence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for k in ("PGHOST", "PGSERVICE", "PGDATABASE", "PGPORT"):
        monkeypatch.delenv(k, raising=False)
    with pytest.raises(ConfigError, match="the daemon has no target"):
        targets_of(cfg_from(tmp_path, ""), sandbox=False)


def test_the_token_file_must_be_private_single_and_long_enough(tmp_path: Path) -> None:
    token = tmp_path / "token"
    cfg = cfg_from(tmp_path, f'[daemon]\nlisten = "0.0.0.0:8187"\ntoken_file = "{token}"\n')
    with pytest.raises(ConfigError, match="cannot be read"):
        read_token(cfg)
    token.write_text(TOKEN + "\n")
    token.chmod(0o644)
    with pytest.raises(ConfigError, match=r"can be read by others \(mode 644\)") as err:
        read_token(cfg)
    assert err.value.hint == f"chmod 600 {token}"
    token.chmod(0o600)
    assert read_token(cfg) == TOKEN
    token.write_text("short")
    with pytest.raises(ConfigError, match="16 to 4096 characters"):
        read_token(cfg)
    token.unlink()
    token.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ConfigError, match="cannot be read"):
        read_token(cfg)


def test_check_config_prints_what_the_daemon_would_do(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(TOKEN)
    token.chmod(0o600)
    (tmp_path / "tuner.toml").write_text(
        f'[target]\ndsn = "host=/nowhere dbname=app password=hunter2"\n[tuner]\nstate_dir = "{tmp_path / "s"}"\n'
        f'[daemon]\ntoken_file = "{token}"\nwindows = ["Sat 01:00-05:00"]\n')
    out = subprocess.run([sys.executable, "-m", "tuner", "daemon", "--check-config", "--config",
                          str(tmp_path / "tuner.toml")], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("tuner: the daemon's configuration is valid")
    assert "POST allowed with the token" in out.stdout and "windows Sat 01:00-05:00" in out.stdout
    assert "target default: " in out.stdout and "hunter2" not in out.stdout
    lines = check(load_config(tmp_path / "tuner.toml"), sandbox=False)
    assert any("drift check every 10m; re-validation every 7d" in line for line in lines)


def test_a_bad_daemon_config_exits_2_with_a_sentence_and_a_hint(tmp_path: Path) -> None:
    (tmp_path / "tuner.toml").write_text('[daemon]\nlisten = "0.0.0.0:8187"\n')
    out = subprocess.run([sys.executable, "-m", "tuner", "daemon", "--config", str(tmp_path / "tuner.toml")],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 2 and out.stdout == ""
    lines = out.stderr.splitlines()
    assert lines[0].startswith("tuner: error: ") and "not a loopback address" in lines[0]
    assert lines[1].startswith("hint: ") and "Traceback" not in out.stderr


def test_accepted_recommendations_follow_change_keep_and_applied(tmp_path: Path) -> None:
    """A later "keep" withdraws an earlier "change", unless what it kept is that recommendation (applied), or a
    session that is not a re-validation confirmed that very value again and could not tell it from today's
    (issue #53: an accepted value is replaced only when a session finds it outside its near-optimal range)."""
    from tests.unit.test_store import make_report
    from tuner.store import target_id

    cfg = cfg_from(tmp_path, f'[tuner]\nstate_dir = "{tmp_path}"\n')

    def with_rec(sid: str, current: int, recommended: int, decision: str, started: str):  # type: ignore[no-untyped-def]
        r = make_report(sid)
        rec = r.recommendations[0].model_copy(update={"current": current, "recommended": recommended,
                                                      "decision": decision})
        session = r.session.model_copy(update={"started_at": r.session.started_at.fromisoformat(started)})
        return r.model_copy(update={"recommendations": [rec], "session": session})

    async def go() -> list[list[tuple[str, int]]]:
        seen = []
        async with open_store(cfg, check=report_check) as db:
            assert db is not None
            first = with_rec("a00000000001", 1, 64, "change", "2026-01-01T00:00:00+00:00")
            fp = first.target.fingerprint or {}
            tid = target_id(first.target.system_identifier, fp.get("data_directory"), str(fp.get("label")))
            for report, kind in ((first, "recommend"),
                                 (with_rec("a00000000002", 64, 64, "keep", "2026-01-02T00:00:00+00:00"), "recommend"),  # applied
                                 (with_rec("a00000000003", 7, 64, "keep", "2026-01-03T00:00:00+00:00"), "scheduled"),  # found again
                                 (with_rec("a00000000004", 7, 64, "keep", "2026-01-04T00:00:00+00:00"), "revalidate"),  # withdrawn
                                 (with_rec("a00000000005", 1, 64, "change", "2026-01-05T00:00:00+00:00"), "recommend"),
                                 (with_rec("a00000000006", 1, 1, "keep", "2026-01-06T00:00:00+00:00"), "recommend")):  # today's as good
                await db.sessions.save(report, report.target.fingerprint or {}, kind=kind)
                seen.append([(sid, r.recommended) for sid, r in await db.accepted.find(tid)])
        return seen

    assert asyncio.run(go()) == [[("a00000000001", 64)], [("a00000000001", 64)], [("a00000000001", 64)], [],
                                 [("a00000000005", 64)], []]


def test_daemon_values_are_parsed_once_into_types_and_shown_as_written(tmp_path: Path) -> None:
    cfg = cfg_from(tmp_path, '[daemon]\nschedule = "30 3 * * 1-5"\nwindows = ["mon-fri 22:00-04:00"]\n'
                             'drift_check_every = "10 minutes"\nrevalidate_every = "1h30m"\n')
    d = cfg.daemon
    assert d.drift_check_every.delta == timedelta(minutes=10) and d.revalidate_every.seconds == 5400.0
    zone = d.windows.windows[0].tz
    saturday, monday_23h = datetime(2026, 12, 5, 12, tzinfo=zone), datetime(2026, 12, 7, 23, tzinfo=zone)
    assert d.schedule is not None and d.schedule.trigger is d.schedule.trigger  # parsed once, kept
    assert d.schedule.trigger.get_next_fire_time(None, saturday) == monday_23h.replace(hour=3, minute=30)
    assert d.windows.contains(monday_23h) and not d.windows.contains(monday_23h.replace(hour=12))
    # What the user wrote comes back in the dump (and so in 'tuner config validate --print'), and re-reads equal.
    dumped = d.model_dump(mode="json")
    assert (dumped["schedule"], dumped["windows"]) == ("30 3 * * 1-5", ["mon-fri 22:00-04:00"])
    assert (dumped["drift_check_every"], dumped["revalidate_every"]) == ("10 minutes", "1h30m")
    assert type(d).model_validate(dumped) == d


def test_an_empty_schedule_is_none(tmp_path: Path) -> None:
    assert cfg_from(tmp_path, '[daemon]\nschedule = "  "\n').daemon.schedule is None
