"""Hostile inputs, issue #59 items 3, 4, 7 and 8: what another user can plant where root acts.

- an output directory (``--output``) another user may write, or holds their link: refused, nothing written there
  or through the link (item 3);
- a journal, or a directory above it, that another user may have written: refused whole, nothing restored
  (item 4); a journal that names one object twice (20,000 times) is not one tuner wrote: refused (item 7);
- the PostgreSQL build cache: a directory above it another user may write, or a marker whose ``bin_dir`` leaves
  it, is refused before anything there is run (item 8).

The command-line cases run through :func:`tests.unit.test_hostile_inputs.check_case` (exit status, one sentence,
nothing changed in the working directory — where every planted link points); the cache's at unit level, on real
directories. Files another user owns are made with chown(2) to ``nobody`` (the suite runs as root, as tuner does).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tuner.errors import SandboxError
from tuner.sandbox import provider

from .hostile import Input, case_inputs, describe
from .test_hostile_inputs import Case, check_case
from .test_hostile_reports import _base
from .test_hostile_service import ALTER, NOWHERE, OWNER, SYSFS, doc

NOBODY = 65534
Plant = Callable[[Path], None]


def _report(path: Path) -> None:
    path.write_text(json.dumps(_base()))


def _dir(mode: int = 0o755, *, owner: int | None = None, links: dict[str, str] | None = None,
         subdirs: dict[str, tuple[int, int | None]] | None = None) -> Plant:
    """A directory of ``mode`` (and ``owner``), holding ``links`` (name -> target, relative to the working
    directory's ``target``, which is made too) and ``subdirs`` (name -> (mode, owner))."""
    def make(path: Path) -> None:
        target = path.parent / "target"
        target.mkdir(exist_ok=True)
        path.mkdir()
        for name, to in (links or {}).items():
            (path / name).symlink_to(Path("..") / "target" / to if to else Path("..") / "target")
        for name, (sub_mode, sub_owner) in (subdirs or {}).items():
            (path / name).mkdir()
            if sub_owner is not None:
                os.chown(path / name, sub_owner, sub_owner)
            os.chmod(path / name, sub_mode)
        if owner is not None:
            os.chown(path, owner, owner)
        os.chmod(path, mode)
    return make


def _link_to_target(path: Path) -> None:
    (path.parent / "target").mkdir()
    path.symlink_to("target")
    os.lchown(path, NOBODY, NOBODY)


def _under(parent_mode: int) -> Plant:
    def make(path: Path) -> None:
        path.mkdir()
        os.chmod(path, parent_mode)
    return make


def output(plant: Plant, expect: str = "cannot write", *, dest: str = "out", fmt: str = "udev") -> Case:
    return Case(["export", "--format", fmt, "--from", "r.json", "--output", dest], 2, expect,
                files={"r.json": _report, dest.split("/")[0]: plant})


OUTPUTS: dict[str, Case] = {
    # the finding: a world-writable output directory whose udev/ is another user's link to a directory of rules
    "output-world-writable-with-a-link": output(_dir(0o777, links={"udev": ""}), "may write it (mode 0777)"),
    "output-sticky-with-a-link": output(_dir(0o1777, links={"udev": ""}), "(mode 1777)"),
    "output-others-with-a-link": output(_dir(0o755, owner=NOBODY, links={"udev": ""}), "owned by uid 65534"),
    "output-is-a-link": output(_link_to_target, "is a symbolic link"),
    "output-subdirectory-of-another-user": output(_dir(subdirs={"udev": (0o755, NOBODY)}), "owned by uid 65534"),
    "output-subdirectory-world-writable": output(_dir(subdirs={"udev": (0o777, None)}), "(mode 0777)"),
    "output-group-writable": output(_dir(0o775), "(mode 0775)"),
    "output-world-writable-empty": output(_dir(0o777), "(mode 0777)"),
    "output-of-another-user-private": output(_dir(0o700, owner=NOBODY), "owned by uid 65534"),
    "output-link-to-a-file": output(_dir(0o777, links={"conf.d": "f"}), "(mode 0777)", fmt="conf"),
    "output-under-a-world-writable-parent": output(_under(0o777), "pub: group or others may write it",
                                                   dest="pub/out"),
    "output-under-a-parent-of-another-user": output(_dir(0o755, owner=NOBODY), "owned by uid 65534",
                                                    dest="pub/out"),
    "output-sticky-itself": output(_dir(0o1777), "(mode 1777)"),
    "output-conf-link-in-world-writable": output(_dir(0o777, links={"conf.d": ""}), "(mode 0777)", fmt="conf"),
    "output-rollback-link-in-sticky": output(_dir(0o1777, links={"rollback": ""}), "(mode 1777)"),
    # recommend refuses it before the session (before even connecting), not after it
    "output-of-recommend-world-writable": Case(["recommend", "--dsn", NOWHERE, "--output", "out"], 2,
                                               "cannot write into out", files={"out": _dir(0o777, links={"udev": ""})}),
}


# -- the journal ----------------------------------------------------------------------------------------------------
def _journal(raw: bytes, *, mode: int = 0o600, owner: int | None = None, dir_mode: int = 0o700,
             dir_owner: int | None = None, link: bool = False) -> Plant:
    """A state directory (``dir_mode``, ``dir_owner``) holding journal.json (``mode``, ``owner``), or a link to
    one kept beside it."""
    def make(path: Path) -> None:
        path.mkdir()
        real = path.parent / "kept.json" if link else path / "journal.json"
        real.write_bytes(raw)
        os.chmod(real, mode)
        if owner is not None:
            os.chown(real, owner, owner)
        if link:
            (path / "journal.json").symlink_to(real)
        if dir_owner is not None:
            os.chown(path, dir_owner, dir_owner)
        os.chmod(path, dir_mode)
    return make


PLANTED = doc({**ALTER, "name": "commit_delay", "original": "99999"})  # the finding's journal


def restore(plant: Plant, expect: str, *, state: str = "st", args: tuple[str, ...] = ()) -> Case:
    return Case(["restore", *args, "--state-dir", state], 2, expect, files={state.split("/")[0]: plant})


def _pub(inner: Plant, mode: int = 0o777, owner: int | None = None) -> Plant:
    def make(path: Path) -> None:
        path.mkdir()
        inner(path / "st")
        if owner is not None:
            os.chown(path, owner, owner)
        os.chmod(path, mode)
    return make


UNTRUSTED = "may have been written by another user"
JOURNALS: dict[str, Case] = {
    "journal-of-another-user": restore(_journal(PLANTED, mode=0o644, owner=NOBODY), UNTRUSTED),
    "journal-world-writable": restore(_journal(PLANTED, mode=0o666), UNTRUSTED),
    "journal-group-writable": restore(_journal(PLANTED, mode=0o620), UNTRUSTED),
    "journal-dir-world-writable": restore(_journal(PLANTED, dir_mode=0o777), UNTRUSTED),
    "journal-dir-sticky-of-another-user": restore(_journal(PLANTED, dir_mode=0o1777, dir_owner=NOBODY), UNTRUSTED),
    "journal-dir-of-another-user": restore(_journal(PLANTED, dir_owner=NOBODY, dir_mode=0o755), UNTRUSTED),
    "journal-dir-group-writable": restore(_journal(PLANTED, dir_mode=0o770), UNTRUSTED),
    "journal-under-a-world-writable-parent": restore(_pub(_journal(PLANTED)), UNTRUSTED, state="pub/st"),
    "journal-under-a-parent-of-another-user": restore(_pub(_journal(PLANTED), 0o755, NOBODY), UNTRUSTED, state="pub/st"),
    "journal-a-link": restore(_journal(PLANTED, link=True), "symbolic link"),
    "journal-of-another-user-sysfs": restore(_journal(doc(SYSFS), owner=NOBODY), UNTRUSTED),
    "journal-forget-one-of-another-user": restore(_journal(PLANTED, owner=NOBODY), UNTRUSTED, args=("--forget", "1")),
}


def dup(*changes: dict[str, Any], times: int = 1) -> Case:
    return Case(["restore", "--state-dir", "."], 2, "names what entry 1 names",
                files={"journal.json": doc(*(list(changes) * times))})


SCRATCH = {**ALTER, "kind": "scratch_schema", "name": "tuner_scratch", "original": None}
REPLAY = {**ALTER, "kind": "replay_pause", "name": "wal_replay", "original": None, "standby": True}
DUPLICATES: dict[str, Case] = {
    "journal-20000-duplicates": dup({**ALTER, "name": "commit_delay", "original": "0"}, times=20_000),
    "journal-sysfs-twice": dup(SYSFS, times=2),
    "journal-sysfs-twice-other-original": dup(SYSFS, {**SYSFS, "original": "256"}),
    "journal-alter-twice": dup(ALTER, times=2),
    "journal-alter-twice-other-original": dup(ALTER, {**ALTER, "original": "10ms"}),
    "journal-scratch-schema-twice": dup(SCRATCH, times=2),
    "journal-replay-pause-twice": dup(REPLAY, times=2),
    "journal-alter-twice-apart": Case(["restore", "--state-dir", "."], 2, "names what entry 1 names",
                                      files={"journal.json": doc(ALTER, SYSFS, ALTER)}),
}

CLI: dict[str, Case] = {**OUTPUTS, **JOURNALS, **DUPLICATES}


@pytest.mark.parametrize("name", list(CLI))
def test_hostile_planted_input(name: str, tmp_path: Path) -> None:
    check_case(CLI[name], tmp_path)
    target = tmp_path / "cwd" / "target"
    assert not target.exists() or not list(target.iterdir()), "written through another user's link"


# -- the PostgreSQL build cache ---------------------------------------------------------------------------------------
SYSTEM_BIN = "/usr/lib/postgresql/15/bin"  # real binaries a marker could point at


def _cache(tmp: Path, *, marker: Any = None, parent_mode: int = 0o755, parent_owner: int | None = None,
           grandparent_mode: int = 0o755, cache_link: bool = False, bin_link: str | None = None) -> Path:
    """``tmp/g/p/cache/16`` holding a marker (``{"bin_dir": "bin"}`` unless given) and an empty bin/ — a build as
    provide() leaves it, with one thing another user could have done."""
    g, p = tmp / "g", tmp / "g" / "p"
    real = p / ("real-cache" if cache_link else "cache")
    (real / "16" / "bin").mkdir(parents=True)
    if cache_link:
        (p / "cache").symlink_to(real)
    dest = p / "cache" / "16"
    (real / "16" / ".tuner-provided.json").write_text(json.dumps({"bin_dir": "bin"} if marker is None else marker))
    if bin_link:
        (real / "16" / "binlink").symlink_to(bin_link)
    if parent_owner is not None:
        os.chown(p, parent_owner, parent_owner)
    os.chmod(p, parent_mode)
    os.chmod(g, grandparent_mode)
    return dest


CACHES: dict[str, tuple[dict[str, Any], str]] = {  # name: (how the cache is planted, the sentence)
    "cache-parent-of-another-user": ({"parent_owner": NOBODY}, "may be written by another user"),
    "cache-parent-world-writable": ({"parent_mode": 0o777}, "may be written by another user"),
    "cache-grandparent-world-writable": ({"grandparent_mode": 0o777}, "may be written by another user"),
    "cache-is-a-link": ({"cache_link": True}, "may be written by another user"),
    "cache-bin-dir-absolute": ({"marker": {"bin_dir": SYSTEM_BIN}}, "names binaries outside"),
    "cache-bin-dir-climbs-out": ({"marker": {"bin_dir": "../../../../../../.." + SYSTEM_BIN}}, "names binaries outside"),
    "cache-bin-dir-climbs-back": ({"marker": {"bin_dir": "bin/../../16x"}}, "names binaries outside"),
    "cache-bin-dir-a-link-out": ({"marker": {"bin_dir": "binlink"}, "bin_link": SYSTEM_BIN}, "names binaries outside"),
    "cache-bin-dir-a-list": ({"marker": {"bin_dir": ["bin"]}}, "names binaries outside"),
    "cache-bin-dir-a-number": ({"marker": {"bin_dir": 16}}, "names binaries outside"),
    "cache-marker-a-list": ({"marker": ["bin"]}, "names binaries outside"),
    "cache-marker-without-bin-dir": ({"marker": {"bin": "bin"}}, "names binaries outside"),
}


@pytest.mark.parametrize("name", list(CACHES))
def test_a_planted_build_cache_is_refused_before_anything_runs(name: str, tmp_path: Path) -> None:
    how, expect = CACHES[name]
    dest = _cache(tmp_path, **how)
    with pytest.raises(SandboxError, match=expect) as caught:
        provider._cached(dest, 16)
    assert "\n" not in str(caught.value)


INPUTS: list[Input] = [
    *case_inputs(OUTPUTS.items(), "output directory", findings={n: {"59.3"} for n in OUTPUTS}),
    *case_inputs(JOURNALS.items(), "journal's place", findings={n: {"59.4"} for n in JOURNALS}),
    *case_inputs(DUPLICATES.items(), "journal", findings={n: {"59.7"} for n in DUPLICATES}),
    *[Input(n, "build cache", describe(how), frozenset({"59.8"})) for n, (how, _) in CACHES.items()],
]
