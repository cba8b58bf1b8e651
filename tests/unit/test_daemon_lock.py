"""One daemon per state directory: a second one — another process, as in real life — is refused with one sentence
naming the first; the lock dies with its holder (even by SIGKILL), so a file a dead daemon left is taken over."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tuner.actuate.journal_lock import LOCK_NAME as JOURNAL_LOCK_NAME
from tuner.actuate.journal_lock import JournalLock
from tuner.daemon.daemon_lock import LOCK_NAME, DaemonLock
from tuner.errors import TunerError

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}

TRY_LOCK = (
    "import sys\n"
    "from pathlib import Path\n"
    "from tuner.daemon.daemon_lock import DaemonLock\n"
    "from tuner.errors import TunerError\n"
    "try:\n"
    "    with DaemonLock(Path(sys.argv[1])):\n"
    "        print('locked')\n"
    "except TunerError as e:\n"
    "    print(e); print(e.hint); sys.exit(e.exit_code)\n"
)

HOLD_LOCK = (
    "import subprocess, sys, time\n"
    "from pathlib import Path\n"
    "from tuner.daemon.daemon_lock import DaemonLock\n"
    "with DaemonLock(Path(sys.argv[1])):\n"
    "    child = subprocess.Popen(['sleep', '120'])  # a program the daemon started, like a restart_command\n"
    "    print(child.pid, flush=True)\n"
    "    sys.stdin.read()  # until the test closes stdin (or kills it)\n"
)


def try_lock(state_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", TRY_LOCK, str(state_dir)], capture_output=True, text=True,
                          timeout=120, env=ENV)


def test_the_lock_creates_a_private_state_directory_and_names_its_holder(tmp_path: Path) -> None:
    state = tmp_path / "a" / "state"
    with DaemonLock(state) as lock:
        assert lock.held and lock.path == state / "daemon.lock"
        assert stat.S_IMODE(state.stat().st_mode) == 0o700
        assert stat.S_IMODE(lock.path.stat().st_mode) == 0o600
        text = lock.path.read_text()
        assert text.startswith(f"pid {os.getpid()}, started 20") and text.endswith("\n")
    assert not lock.held
    assert lock.path.exists() and lock.path.read_text() == ""  # the file stays, emptied


def test_an_existing_state_directory_keeps_its_mode(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o755)
    state.chmod(0o755)
    with DaemonLock(state):
        assert stat.S_IMODE(state.stat().st_mode) == 0o755


def test_a_second_daemon_in_another_process_is_refused_with_one_sentence(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with DaemonLock(state):
        second = try_lock(state)
    assert second.returncode == 1, second.stderr
    message, hint = second.stdout.strip().splitlines()
    assert message.startswith(f"another tuner daemon (pid {os.getpid()}, started 20")
    assert message.endswith(f") holds {state / 'daemon.lock'}")
    assert hint == "stop it first (systemctl stop tuner), or give this one its own [tuner] state_dir"
    third = try_lock(state)  # released: the next one gets it
    assert third.returncode == 0 and third.stdout == "locked\n", third.stderr


def test_a_daemon_in_this_process_is_refused_while_another_process_holds_it(tmp_path: Path) -> None:
    state = tmp_path / "state"
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(state)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=ENV)
    child = None
    try:
        assert holder.stdout is not None and holder.stdin is not None
        child = int(holder.stdout.readline())
        with pytest.raises(TunerError) as err:
            DaemonLock(state).acquire()
        assert str(err.value).startswith(f"another tuner daemon (pid {holder.pid}, started ")
        assert err.value.exit_code == 1 and err.value.hint is not None
        holder.stdin.close()
        assert holder.wait(timeout=60) == 0
        with DaemonLock(state):
            pass
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(timeout=60)
        if child is not None:
            os.kill(child, signal.SIGKILL)


def test_the_lock_dies_with_its_holder_and_not_with_the_programs_it_started(tmp_path: Path) -> None:
    """SIGKILL leaves a file naming a dead pid: the kernel's flock, not that file, decides, so it is taken over;
    and the program the dead daemon started (still running) did not inherit the lock."""
    state = tmp_path / "state"
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(state)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=ENV)
    child = None
    try:
        assert holder.stdout is not None
        child = int(holder.stdout.readline())
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=60)
        assert (state / LOCK_NAME).read_text().startswith(f"pid {holder.pid}, ")  # stale: the holder is gone
        assert Path(f"/proc/{child}").exists()
        with DaemonLock(state) as lock:
            assert lock.path.read_text().startswith(f"pid {os.getpid()}, ")
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(timeout=60)
        if child is not None:
            os.kill(child, signal.SIGKILL)


def test_a_stale_file_naming_another_pid_is_taken_over(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / LOCK_NAME).write_text("pid 999999999, started 2020-01-01T00:00:00+00:00\nand a long tail of junk\n")
    with DaemonLock(state) as lock:
        assert lock.path.read_text().count("\n") == 1
        assert lock.path.read_text().startswith(f"pid {os.getpid()}, started ")


def test_a_holder_whose_file_says_nothing_useful_is_still_refused(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with DaemonLock(state) as first:
        first.path.write_text("\x1b[2J junk a terminal would obey\n")
        with pytest.raises(TunerError) as err:
            DaemonLock(state).acquire()
    assert str(err.value) == f"another tuner daemon (pid unknown) holds {state / LOCK_NAME}"


def test_two_locks_in_one_process_exclude_each_other_and_acquire_twice_is_a_no_op(tmp_path: Path) -> None:
    lock = DaemonLock(tmp_path)
    lock.acquire()
    lock.acquire()
    with pytest.raises(TunerError, match="another tuner daemon"):
        DaemonLock(tmp_path).acquire()
    lock.release()
    lock.release()
    with DaemonLock(tmp_path):
        pass


def test_a_symbolic_link_in_place_of_the_lock_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    target = tmp_path / "precious"
    target.write_text("keep me\n")
    (state / LOCK_NAME).symlink_to(target)
    with pytest.raises(TunerError) as err:
        DaemonLock(state).acquire()
    assert str(err.value) == f"{state / LOCK_NAME} is a symbolic link; tuner does not lock through one"
    assert err.value.hint == "remove it: tuner creates its lock file itself"
    assert target.read_text() == "keep me\n"


def test_a_fifo_in_place_of_the_lock_is_refused_without_hanging(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    os.mkfifo(state / LOCK_NAME)
    with pytest.raises(TunerError, match="is not a regular file"):
        DaemonLock(state).acquire()


def test_a_state_directory_that_cannot_be_made_is_one_sentence(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(TunerError) as err:
        DaemonLock(blocker / "state").acquire()
    assert str(err.value).startswith(f"cannot create tuner's state directory {blocker / 'state'}: ")
    assert err.value.hint is not None and "state_dir" in err.value.hint


def test_the_daemon_lock_and_the_journal_lock_are_different_files(tmp_path: Path) -> None:
    """The daemon holds its lock all the time; its sessions take the journal's lock one by one."""
    assert LOCK_NAME != JOURNAL_LOCK_NAME
    journal = JournalLock(tmp_path)
    journal.acquire("session 1")
    try:
        with DaemonLock(tmp_path):
            assert (tmp_path / JOURNAL_LOCK_NAME).read_text().startswith(f"pid {os.getpid()}, session 1")
    finally:
        journal.release()
