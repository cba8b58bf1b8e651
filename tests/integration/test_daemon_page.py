"""A real `tuner daemon` on the suite's staging clone (PostgreSQL 15): its /metrics exports every metric the
shipped alert rules and Grafana dashboard query, its drift check's reading of the server is the
tuner_setting_in_force gauge, and its page renders in headless Chromium with the target and the setting in force."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import Clone, wait_for
from tests.integration.test_daemon import _sql, daemon_proc  # noqa: F401 (daemon_proc is a fixture)
from tests.support import chromium
from tests.support.prometheus import dashboard_exprs, rule_exprs, unknown

EIC = "effective_io_concurrency"
KEY = ("tuner_setting_in_force", (("knob", EIC), ("object", ""), ("target", "default")))


def test_a_real_daemon_exports_what_the_examples_query_and_its_page_shows_the_setting_in_force(
        clone: Clone, daemon_proc: Any, tmp_path: Path) -> None:  # noqa: F811
    d = daemon_proc(families=["concurrency"], drift="2s").start()
    try:
        # The drift check runs at start; its reading of the server becomes the gauge.
        assert wait_for(lambda: KEY in d.metrics(), 120), d.stderr()
        metrics = d.metrics()
        server_eic = int(_sql(clone.dsn, "SHOW effective_io_concurrency")[0])
        assert metrics[KEY] == server_eic
        assert metrics[("tuner_last_restore_successful", ())] == 1
        status, text = d.get("/metrics")
        assert status == 200
        assert unknown(text, rule_exprs() + dashboard_exprs()) == set()

        status, page = d.get("/")
        assert status == 200 and 'data-target="default"' in page
        if shutil.which("chromium") is None:
            pytest.skip("Chromium is not installed (apt-get install chromium): the page was checked as HTML only")
        url = f"http://127.0.0.1:{d.port}/"
        dom = chromium.dump_dom(url)
        png = chromium.screenshot(url, tmp_path / "daemon-page.png", width=1280, height=1400)
    finally:
        code, _ = d.stop()
    assert code == 0, d.stderr()
    assert "<h1>tuner daemon</h1>" in dom and 'data-target="default"' in dom
    row = dom.split(f'<tr data-knob="{EIC}">', 1)[1].split("</tr>", 1)[0]
    assert f"<td class=\"num\">{server_eic}</td>" in row or f">{server_eic}<" in row
    assert png.stat().st_size > 20_000
