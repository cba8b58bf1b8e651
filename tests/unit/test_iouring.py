"""What stops io_method = io_uring, as a pure decision on each blocker, and the facts read from a /proc laid out as
the kernel lays it out (proc(5))."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tuner.hostfacts.iouring import IoUringFacts, blocker, read_facts

BOTH = ("sync", "worker", "io_uring")
CLEAR = IoUringFacts(offered=BOTH, disabled=0, group=-1, gids=frozenset({104}), seccomp=0, nofile_hard=1048576,
                     slots=127, memlock_bytes=8 << 20, kernel=(6, 18))


def test_nothing_stops_io_uring_on_a_liburing_build_with_the_kernel_allowing_it() -> None:
    assert blocker(CLEAR) is None


def test_a_build_without_liburing_says_what_it_offers() -> None:
    why = blocker(replace(CLEAR, offered=("sync", "worker")))
    assert why is not None and "without liburing" in why and "sync, worker" in why


def test_io_uring_disabled_2_refuses_everyone_even_cap_sys_admin() -> None:
    why = blocker(replace(CLEAR, disabled=2, cap_sys_admin=True, group=104))
    assert why is not None and "kernel.io_uring_disabled is 2" in why


@pytest.mark.parametrize(("change", "stopped"), [
    ({}, "no kernel.io_uring_group is set"),
    ({"group": 999}, "not in kernel.io_uring_group 999"),
    ({"group": 104}, None),  # the postmaster's group is the sysctl's
    ({"cap_sys_admin": True}, None),
])
def test_io_uring_disabled_1_lets_only_the_io_uring_group_and_cap_sys_admin(change: dict[str, object],
                                                                            stopped: str | None) -> None:
    why = blocker(replace(CLEAR, disabled=1, **change))  # type: ignore[arg-type]
    assert (why is None) if stopped is None else (why is not None and stopped in why and "is 1" in why)


def test_a_seccomp_filter_on_the_postmaster_stops_it_and_strict_mode_or_none_does_not() -> None:
    why = blocker(replace(CLEAR, seccomp=2))
    assert why is not None and "seccomp filter" in why
    assert blocker(replace(CLEAR, seccomp=0)) is None


def test_fewer_open_files_than_process_slots_stops_it() -> None:
    why = blocker(replace(CLEAR, nofile_hard=100, slots=127))
    assert why is not None and "100 files" in why and "127" in why and "ulimit -n" in why
    assert blocker(replace(CLEAR, nofile_hard=None)) is None  # unlimited


@pytest.mark.parametrize(("kernel", "stops"), [((5, 11), True), ((5, 12), False), ((6, 18), False)])
def test_memlock_counts_only_on_kernels_before_5_12(kernel: tuple[int, int], stops: bool) -> None:
    why = blocker(replace(CLEAR, kernel=kernel, memlock_bytes=64 << 10))
    assert (why is not None and "RLIMIT_MEMLOCK" in why and "64 kB" in why) if stops else why is None
    assert blocker(replace(CLEAR, kernel=(5, 4), memlock_bytes=None)) is None  # unlimited


def test_tuner_s_own_io_uring_setup_failing_is_the_last_word() -> None:
    why = blocker(replace(CLEAR, setup_error="Operation not permitted"))
    assert why == "io_uring_setup fails on this host (Operation not permitted)"


def test_the_first_blocker_is_the_one_named() -> None:
    why = blocker(replace(CLEAR, disabled=2, seccomp=2, nofile_hard=10))
    assert why is not None and "io_uring_disabled is 2" in why


def _proc(tmp: Path, *, status: str, limits: str, disabled: str = "1\n", group: str = "103\n") -> Path:
    (tmp / "data").mkdir()
    (tmp / "data" / "postmaster.pid").write_text("4242\n/var/lib/postgresql/data\n")
    (tmp / "proc" / "4242").mkdir(parents=True)
    (tmp / "proc" / "4242" / "status").write_text(status)
    (tmp / "proc" / "4242" / "limits").write_text(limits)
    (tmp / "proc" / "sys" / "kernel").mkdir(parents=True)
    (tmp / "proc" / "sys" / "kernel" / "io_uring_disabled").write_text(disabled)
    (tmp / "proc" / "sys" / "kernel" / "io_uring_group").write_text(group)
    return tmp / "proc"


STATUS = ("Name:\tpostgres\nUid:\t101\t101\t101\t101\nGid:\t104\t104\t104\t104\nGroups:\t103 104 \n"
          "CapEff:\t0000000000000000\nSeccomp:\t2\nSeccomp_filters:\t1\n")
LIMITS = ("Limit                     Soft Limit           Hard Limit           Units     \n"
          "Max open files            100                  100                  files     \n"
          "Max locked memory         65536                65536                bytes     \n")


def test_the_facts_come_from_the_postmaster_named_in_postmaster_pid(tmp_path: Path) -> None:
    proc = _proc(tmp_path, status=STATUS, limits=LIMITS)
    settings = {"max_connections": "100", "autovacuum_max_workers": "3", "max_worker_processes": "8",
                "max_wal_senders": "10"}
    f = read_facts(BOTH, tmp_path / "data", settings, proc=proc)
    assert (f.disabled, f.group, f.seccomp, f.nofile_hard, f.memlock_bytes, f.slots) == (1, 103, 2, 100, 65536, 126)
    assert f.gids == {103, 104} and not f.cap_sys_admin
    # in io_uring_group 103, so the sysctl lets it through; the seccomp filter does not, and then the open files
    assert "seccomp filter" in (blocker(f) or "")
    assert "may open 100 files" in (blocker(replace(f, seccomp=0)) or "")


def test_cap_sys_admin_is_read_from_the_effective_set(tmp_path: Path) -> None:
    proc = _proc(tmp_path, status=STATUS.replace("CapEff:\t0000000000000000", "CapEff:\t000001ffffffffff"),
                 limits=LIMITS.replace("100                  100", "unlimited            unlimited"))
    f = read_facts(BOTH, tmp_path / "data", {}, proc=proc)
    assert f.cap_sys_admin and f.nofile_hard is None and f.slots is None


def test_without_liburing_nothing_else_is_read(tmp_path: Path) -> None:
    assert read_facts(("sync", "worker"), tmp_path / "absent", {}) == IoUringFacts(offered=("sync", "worker"))
