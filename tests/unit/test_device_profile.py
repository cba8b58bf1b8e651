"""Device profile strings: parsed once, shown canonically; bad ones and unusable ones get one sentence and exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tuner.settings.config_load import load_config
from tuner.errors import ConfigError
from tuner.sandbox import Sandbox
from tuner.sandbox.device import LOCAL, SYNTAX, DeviceProfile, ProfileError, parse_profile
from tuner.sandbox.device.latency import LatencyLayer

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("text", "profile", "shown"),
    [
        ("local", LOCAL, "local"),
        ("ram", DeviceProfile(ram=True), "ram"),
        ("hdd", DeviceProfile(hdd=True), "hdd"),
        ("iops=3000", DeviceProfile(read_iops=3000), "iops=3000"),
        ("mbps=125", DeviceProfile(read_mbps=125), "mbps=125"),
        ("latency=1ms,iops=3000", DeviceProfile(latency_us=1000, read_iops=3000), "latency=1ms,iops=3000"),
        (" Latency=500us , ram ", DeviceProfile(ram=True, latency_us=500), "ram,latency=500us"),
        ("latency=0.25ms", DeviceProfile(latency_us=250), "latency=250us"),
        ("local,mbps=125", DeviceProfile(read_mbps=125), "mbps=125"),
        ("flush=2ms", DeviceProfile(flush_us=2000), "flush=2ms"),
        ("wiops=3000", DeviceProfile(write_iops=3000), "wiops=3000"),
        ("wmbps=125", DeviceProfile(write_mbps=125), "wmbps=125"),
        ("wiops=3000,latency=1ms,flush=2ms,iops=3000",
         DeviceProfile(latency_us=1000, read_iops=3000, flush_us=2000, write_iops=3000),
         "latency=1ms,iops=3000,flush=2ms,wiops=3000"),
        ("hdd,flush=0.5ms", DeviceProfile(hdd=True, flush_us=500), "hdd,flush=500us"),
        ("ram,mbps=500,wmbps=200", DeviceProfile(ram=True, read_mbps=500, write_mbps=200), "ram,mbps=500,wmbps=200"),
    ],
)
def test_a_profile_parses_and_shows_canonically(text: str, profile: DeviceProfile, shown: str) -> None:
    assert parse_profile(text) == profile
    assert str(profile) == shown
    assert parse_profile(shown) == profile  # what is shown reads back as the same profile


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "empty"),
        ("ssd", "unknown device profile part 'ssd'"),
        ("iops", "unknown device profile part 'iops'"),
        ("iops=0", "whole number from 1"),
        ("iops=3k", "whole number from 1"),
        ("mbps=-5", "whole number from 1"),
        ("latency=1", "needs a unit"),
        ("latency=0.5us", "whole number of microseconds"),
        ("latency=5000ms", "whole number of microseconds"),
        ("iops=3,iops=4", "appears twice"),
        ("ram,local", "either local or ram"),
        ("hdd,latency=1ms", "hdd or latency"),
        ("flush", "unknown device profile part 'flush'"),
        ("flush=2", "flush='2' needs a unit"),
        ("flush=0ms", "whole number of microseconds"),
        ("flush=1.5us", "whole number of microseconds"),
        ("wiops=0", "wiops='0' is not a whole number from 1"),
        ("wmbps=fast", "wmbps='fast' is not a whole number from 1"),
        ("flush=1ms,flush=2ms", "'flush' appears twice"),
    ],
)
def test_a_bad_profile_is_one_sentence(text: str, says: str) -> None:
    with pytest.raises(ProfileError) as err:
        parse_profile(text)
    assert says in str(err.value) and "\n" not in str(err.value)


def test_the_write_side_puts_the_fuse_layer_in_the_stack_but_no_cgroup() -> None:
    # Flushes and write caps are served by latencyfs (it sees every write, whichever process made it), so a profile
    # with only write parts still needs the layer, and no cgroup.
    for text in ("flush=2ms", "wiops=300", "wmbps=20"):
        profile = parse_profile(text)
        assert profile.layered and not profile.capped and not profile.local, text
    assert not parse_profile("iops=300").layered


def test_a_spindle_flushes_in_one_rotation_unless_told_otherwise() -> None:
    assert parse_profile("hdd").flush_delay_us == 8333  # 60 s / 7,200 rpm
    assert parse_profile("hdd,flush=1ms").flush_delay_us == 1000
    assert parse_profile("latency=1ms").flush_delay_us == 0
    assert LOCAL.flush_delay_us == 0
    assert str(parse_profile("hdd")) == "hdd"  # the implied flush is not shown: the profile reads back the same


def test_the_syntax_names_every_part() -> None:
    for part in ("local", "ram", "hdd", "iops=", "mbps=", "latency=", "flush=", "wiops=", "wmbps="):
        assert part in SYNTAX, part


def test_the_config_parses_the_profile_once_and_prints_it_back() -> None:
    cfg = load_config(None, environ={"TUNER_SANDBOX__DEVICE": "latency=1ms,iops=3000"})
    assert cfg.sandbox.device == DeviceProfile(latency_us=1000, read_iops=3000)
    assert cfg.model_dump(mode="json")["sandbox"]["device"] == "latency=1ms,iops=3000"
    assert load_config(None, environ={}).sandbox.device == LOCAL
    with pytest.raises(ConfigError, match=r"\[sandbox\] device: unknown device profile part 'fast'"):
        load_config(None, environ={"TUNER_SANDBOX__DEVICE": "fast"})


def test_a_profile_on_the_host_disk_is_refused_before_anything_is_made(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match='needs the sandbox\'s own loop disk.*disk = "host"') as err:
        Sandbox(base_dir=tmp_path, disk="host", device=DeviceProfile(read_iops=300))
    assert err.value.hint and "--device" in err.value.hint
    assert not list(tmp_path.iterdir())


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    own = {"TUNER_TUNER__STATE_DIR": os.environ["TUNER_TUNER__STATE_DIR"]} if "TUNER_TUNER__STATE_DIR" in os.environ else {}
    return subprocess.run([sys.executable, "-m", "tuner", *args], capture_output=True, text=True, cwd=cwd, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), **own})


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--sandbox", "--device", "iops=fast"], "iops='fast' is not a whole number"),
        (["--device", "iops=300"], "--device emulates a disk under tuner's own sandbox"),
    ],
)
def test_recommend_refuses_a_bad_device_in_one_sentence(tmp_path: Path, args: list[str], says: str) -> None:
    proc = _run("recommend", *args, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 2 and says in lines[0] and lines[1].startswith("hint:"), proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_cloud_shorthand_stands_for_its_parts_and_the_report_spells_out_both() -> None:
    gp3 = parse_profile("gp3")
    assert gp3 == DeviceProfile(latency_us=800, read_iops=3000, read_mbps=125)  # the same disk as its parts
    assert gp3.shorthand == "gp3" and str(gp3) == "latency=800us,iops=3000,mbps=125"
    assert gp3.described == "gp3 = latency=800us,iops=3000,mbps=125"
    assert parse_profile(gp3.described).shorthand == "gp3"  # the report's spelling reads back, name and all
    assert parse_profile("latency=800us,iops=3000,mbps=125").described == "latency=800us,iops=3000,mbps=125"
    assert parse_profile("GP2-100G") == DeviceProfile(latency_us=1000, read_iops=300, read_mbps=128)


def test_every_shorthand_parses_and_the_syntax_lists_it() -> None:
    from tuner.sandbox.device.cloud import NAMED, SHORTHANDS
    from tuner.sandbox.device import SYNTAX

    assert {"gp3", "gp2-100g", "io2", "pd-balanced", "hdd", "ram"} <= set(SHORTHANDS)
    for name, s in SHORTHANDS.items():
        assert str(parse_profile(s.parts)) == s.parts and s.sources  # canonical, and sourced
        assert parse_profile(name) == parse_profile(s.parts)
    assert all(n in SYNTAX for n in NAMED)


@pytest.mark.parametrize(("text", "says"), [
    ("gp3,ram", "gp3 is a shorthand for latency=800us,iops=3000,mbps=125 and stands alone"),
    ("iops=100,io2", "io2 is a shorthand"),
    ("gp3 = latency=1ms", "unknown device profile part"),  # a spelled-out shorthand must match its parts
])
def test_a_shorthand_combined_with_other_parts_is_one_sentence(text: str, says: str) -> None:
    with pytest.raises(ProfileError) as err:
        parse_profile(text)
    assert says in str(err.value) and "\n" not in str(err.value)


def test_the_config_keeps_a_shorthand_and_prints_it_with_its_parts() -> None:
    cfg = load_config(None, environ={"TUNER_SANDBOX__DEVICE": "pd-balanced"})
    assert cfg.sandbox.device.shorthand == "pd-balanced"
    shown = cfg.model_dump(mode="json")["sandbox"]["device"]
    assert shown == "pd-balanced = latency=1500us,iops=3600,mbps=168"
    assert load_config(None, environ={"TUNER_SANDBOX__DEVICE": shown}).sandbox.device.shorthand == "pd-balanced"


def test_the_helper_is_told_the_write_side_in_its_own_units(tmp_path: Path) -> None:
    layer = LatencyLayer(tmp_path / "latencyfs", tmp_path / "disk.img", tmp_path / "fuse", latency_us=0, hdd=True,
                         flush_us=parse_profile("hdd").flush_delay_us, write_iops=3000, write_bps=125 * 2**20)
    args = layer.args()
    assert args[:4] == [str(tmp_path / "latencyfs"), str(tmp_path / "disk.img"), str(tmp_path / "fuse"), "0"]
    assert args[4:] == ["--hdd", "--flush-us", "8333", "--write-iops", "3000", "--write-bps", str(125 * 2**20)]
    assert LatencyLayer(tmp_path, tmp_path, tmp_path, latency_us=1000, hdd=False).args()[3:] == ["1000"]
