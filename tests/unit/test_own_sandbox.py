"""The one own-sandbox rule (tuner.sandbox.own.is_own_sandbox): the concurrency family's ALTER SYSTEM screen
and the journal's write-back ask it, so its edges are pinned here on real directories."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuner.sandbox.own import OWNER_FILE, PREFIX, is_own_sandbox


def _sandbox(parent: Path, name: str) -> Path:
    root = parent / name
    root.mkdir()
    (root / OWNER_FILE).write_text("{}")
    (root / "standby").mkdir()
    return root


def test_a_data_directory_inside_a_sandbox_of_tuners_is_its_own(tmp_path: Path) -> None:
    root = _sandbox(tmp_path, f"{PREFIX}a1")
    assert is_own_sandbox(str(root / "standby"), str(root))
    assert is_own_sandbox(str(root), str(root))  # the root itself: inside, by path components


def test_a_sibling_sharing_the_prefix_is_not_inside(tmp_path: Path) -> None:
    # /var/tmp/sb1 vs /var/tmp/sb10: a string prefix, not a path prefix
    sb1 = _sandbox(tmp_path, f"{PREFIX}sb1")
    sb10 = _sandbox(tmp_path, f"{PREFIX}sb10")
    assert not is_own_sandbox(str(sb10 / "standby"), str(sb1))
    assert is_own_sandbox(str(sb10 / "standby"), str(sb10))


@pytest.mark.parametrize("data_directory, sandbox_dir", [
    (None, "x"), ("", "x"), ("/d", None), ("/d", ""), ("/d", 7), ("/d", ["x"]),
])
def test_none_empty_and_non_strings_are_not_a_sandbox(data_directory: str | None, sandbox_dir: object) -> None:
    assert not is_own_sandbox(data_directory, sandbox_dir)


def test_a_directory_not_tuners_is_not_a_sandbox(tmp_path: Path) -> None:
    unnamed = tmp_path / "elsewhere"  # the owner file but not the name
    unnamed.mkdir()
    (unnamed / OWNER_FILE).write_text("{}")
    (unnamed / "standby").mkdir()
    assert not is_own_sandbox(str(unnamed / "standby"), str(unnamed))
    unowned = tmp_path / f"{PREFIX}noowner"  # the name but not the owner file
    (unowned / "standby").mkdir(parents=True)
    assert not is_own_sandbox(str(unowned / "standby"), str(unowned))


def test_paths_that_are_gone_are_not_a_sandbox(tmp_path: Path) -> None:
    root = _sandbox(tmp_path, f"{PREFIX}a1")
    assert not is_own_sandbox(str(root / "missing"), str(root))
    assert not is_own_sandbox(str(tmp_path / f"{PREFIX}gone" / "standby"), str(tmp_path / f"{PREFIX}gone"))


def test_symbolic_links_are_followed_both_ways(tmp_path: Path) -> None:
    root = _sandbox(tmp_path, f"{PREFIX}a1")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    # a link inside the sandbox to a foreign data directory does not make it the sandbox's
    (root / "planted").symlink_to(foreign)
    assert not is_own_sandbox(str(root / "planted"), str(root))
    # a link to the sandbox (under any name) is the sandbox; a data directory reached through one is inside it
    alias = tmp_path / "alias"
    alias.symlink_to(root)
    assert is_own_sandbox(str(alias / "standby"), str(alias))
    assert is_own_sandbox(str(root / "standby"), str(alias))
    # a link named like a sandbox, to a directory that is not one, is not one: the name read is the target's
    fake = tmp_path / f"{PREFIX}fake"
    fake.symlink_to(foreign)
    (foreign / OWNER_FILE).write_text("{}")
    assert not is_own_sandbox(str(foreign), str(fake))


def test_a_symbolic_link_loop_is_not_a_sandbox(tmp_path: Path) -> None:
    loop = tmp_path / f"{PREFIX}loop"
    loop.symlink_to(loop)
    assert not is_own_sandbox(str(loop / "standby"), str(loop))
