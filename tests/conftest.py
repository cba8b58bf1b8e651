from __future__ import annotations

import pytest

from tuner import log


@pytest.fixture(autouse=True, scope="session")
def _quiet_logs() -> None:
    log.configure("warning", json=True)
