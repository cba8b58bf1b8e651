from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import tuner.families  # noqa: F401  the families' registry: a policy or a report reads its family sections through it
from tuner import log


@pytest.fixture(autouse=True, scope="session")
def _quiet_logs() -> None:
    log.configure("warning", json=True)


@pytest.fixture(autouse=True)
def _own_state_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Every test — and every tuner process a test starts, through the environment — journals into a state
    directory of its own, never the machine's default (/var/lib/tuner as root): a test that leaves a tuner
    running, or a second test run on the same machine, cannot make another test find "another tuner"."""
    path = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("TUNER_TUNER__STATE_DIR", str(path))
    yield path
