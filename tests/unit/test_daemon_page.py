"""The daemon's page for people (GET /) and the HTML answers of the report endpoints: rendered from a real store
(SQLite, with stored sessions) through the daemon's own backend (Queries), served by the daemon's own app, and
looked at in headless Chromium; auth and escaping as the API's. (A real daemon's page, with what the drift check
read from a real PostgreSQL: tests/integration/test_daemon_page.py.)"""

from __future__ import annotations

import asyncio
import re
import shutil
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from tests.support import chromium
from tests.unit.test_daemon_api import TOKEN, Backend, call
from tests.unit.test_store import T0, fp, make_report
from tuner.settings.config_load import load_config
from tuner.daemon.api import build_app, make_runner
from tuner.daemon.drift import server_values
from tuner.daemon.metrics import Metrics
from tuner.daemon.queries import Queries
from tuner.daemon.state import DaemonState, Target
from tuner.daemon.worker import Worker
from tuner.report.model import LeftOutStatement, QueryEffect, Report, StatementOut
from tuner.report.validate import check
from tuner.store import open_store, target_id

EIC = "effective_io_concurrency"
needs_chromium = pytest.mark.skipif(shutil.which("chromium") is None,
                                    reason="Chromium is not installed (apt-get install chromium)")


async def _seeded(tmp: Path, *, name: str = "default", dsn: str = "host=staging dbname=app") -> Queries:
    """A daemon backend over a store holding three sessions of one target: 1 -> 64 (change), 1 -> 256 (change),
    then a session that kept 256 — so 256 is in force — and the drift check's reading of the server."""
    cfg = load_config(None, overrides={"tuner": {"state_dir": str(tmp)}, "target": {"dsn": dsn}})
    async with open_store(cfg, check=check) as db:
        assert db is not None
        for i, (current, rec, decision) in enumerate([(1, 64, "change"), (1, 256, "change"), (256, 256, "keep")]):
            r = make_report(f"{i + 1:012x}", at=T0 + timedelta(days=i), current=current, recommended=rec,
                            decision=decision)
            await db.sessions.save(r, r.target.fingerprint or {})
    f = fp()
    target = Target(name, cfg, store_id=target_id("7001", f["data_directory"], f["label"]))
    st = DaemonState(cfg=cfg, targets={name: target}, token=None, owner="test")
    st.on_server[name] = ("2026-12-06T10:00:00+00:00", {(EIC, None): 256, ("read_ahead_kb", "/dev/sdb"): 4096})
    return Queries(st, Worker(st))


def _with(tmp: Path, go: Callable[[Queries], Awaitable[Any]], **kw: Any) -> Any:
    async def run() -> Any:
        q = await _seeded(tmp, **kw)
        try:
            return await go(q)
        finally:
            await q.worker.close()

    return asyncio.run(run())


def test_the_page_shows_the_target_what_is_in_force_and_the_latest_session(tmp_path: Path) -> None:
    page = _with(tmp_path, lambda q: q.page())
    assert 'data-target="default"' in page and "host=staging dbname=app" in page
    row = re.search(r'<tr data-knob="effective_io_concurrency">(.*?)</tr>', page)
    assert row is not None
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(1))
    assert cells[1] == "256" and cells[2] == "256" and cells[3] == "applied"  # accepted, on the server, state
    assert "000000000002" in cells[5]  # the session whose change is in force (the later one kept it)
    assert 'href="/v1/sessions/000000000003?format=html"' in page  # the newest session's whole report
    assert page.count('data-figure="history"') == 1  # effective_io_concurrency over three sessions
    assert "<script" not in page


def test_a_recommendation_not_applied_on_the_server_says_so(tmp_path: Path) -> None:
    async def go(q: Queries) -> str:
        q.state.on_server["default"] = ("2026-12-06T10:00:00+00:00", {(EIC, None): 1})
        return await q.page()

    page = _with(tmp_path, go)
    row = re.search(r'<tr data-knob="effective_io_concurrency">(.*?)</tr>', page)
    assert row is not None and "not applied" in row.group(1) and 'class="differs"' in row.group(1)


def test_names_and_labels_are_escaped_and_passwords_redacted(tmp_path: Path) -> None:
    name = '<script>alert("x")</script>'
    page = _with(tmp_path, lambda q: q.page(), name=name,
                 dsn="host=staging dbname=app user=tuner password=s3cr3t-pw options='-c x=<img src=y>'")
    assert "<script>" not in page and "<img" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    assert "s3cr3t-pw" not in page


def test_the_page_needs_the_token_where_the_api_does() -> None:
    class PageBackend(Backend):
        async def page(self) -> str:
            return "<!DOCTYPE html><title>t</title>"

        async def session_html(self, session_id: str) -> str | None:
            return None

    open_ = PageBackend()  # loopback: reads need no token
    status, body, headers = call(open_, "GET", "/")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    everywhere = PageBackend(everywhere=True)  # off loopback: every endpoint but /healthz needs it
    assert call(everywhere, "GET", "/")[0] == 401
    assert call(everywhere, "GET", "/", headers={"Authorization": f"Bearer {TOKEN}"})[0] == 200
    rebound = PageBackend()
    rebound.hosts = frozenset({"127.0.0.1:8187"})
    assert call(rebound, "GET", "/", headers={"Host": "evil.example:8187"})[0] == 403


def test_format_html_on_the_report_endpoints_is_text_html(tmp_path: Path) -> None:
    async def go(q: Queries) -> list[tuple[int, str, dict[str, str]]]:
        async with TestClient(TestServer(build_app(q))) as client:
            q.state.bound = ("127.0.0.1", client.port)  # the Host header the client sends is loopback's
            out = []
            for path in ("/v1/recommendations/default?format=html", "/v1/sessions/000000000002?format=html",
                         "/v1/sessions/000000000009?format=html", "/v1/sessions/000000000002?format=pdf",
                         "/v1/recommendations/default?format=sql&file=recommendation.sql"):
                resp = await client.get(path)
                out.append((resp.status, await resp.text(), dict(resp.headers)))
            return out

    rec, session, missing, bad, sql = _with(tmp_path, go)
    for status, body, headers in (rec, session):
        assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
        assert body.startswith("<!DOCTYPE html>") and "effective_io_concurrency" in body
        assert "script-src" not in headers["Content-Security-Policy"]  # default-src 'none' covers scripts
    assert 'id="history"' in session[1]  # the report with its target's stored sessions
    assert missing[0] == 404 and bad[0] == 400
    assert sql[0] == 200 and sql[2]["Content-Type"].startswith("text/plain")


def test_server_values_name_settings_tablespaces_and_devices_as_recommendations_do() -> None:
    fingerprint = {"settings": {EIC: {"value": 200}, "wal_compression": {"value": "lz4"},
                                f"{EIC}:fast": {"value": 64}},
                   "devices": {"sdb": {"node": "/dev/sdb", "read_ahead_kb": 4096}, "sdc": {"node": "/dev/sdc"}}}
    assert server_values(fingerprint) == {(EIC, None): 200, ("wal_compression", None): "lz4", (EIC, "fast"): 64,
                                          ("read_ahead_kb", "/dev/sdb"): 4096}


def test_the_setting_in_force_gauge_follows_the_last_reading() -> None:
    m = Metrics()
    m.set_in_force("a", {(EIC, None): 200, ("wal_compression", None): "lz4", ("read_ahead_kb", "/dev/sdb"): 4096})
    m.set_in_force("b", {(EIC, None): 1})
    text = m.render().decode()
    assert 'tuner_setting_in_force{knob="effective_io_concurrency",object="",target="a"} 200.0' in text
    assert 'tuner_setting_in_force{knob="read_ahead_kb",object="/dev/sdb",target="a"} 4096.0' in text
    assert "wal_compression" not in text  # a text value has no gauge
    m.set_in_force("a", {(EIC, None): 300})
    m.forget_target("b")
    lines = [ln for ln in m.render().decode().splitlines() if ln.startswith("tuner_setting_in_force{")]
    assert lines == ['tuner_setting_in_force{knob="effective_io_concurrency",object="",target="a"} 300.0']


@needs_chromium
def test_the_page_renders_in_headless_chromium_with_the_target_and_the_setting_in_force(tmp_path: Path) -> None:
    async def go(q: Queries) -> tuple[str, Path]:
        runner = make_runner(q)
        await runner.setup()
        try:
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            port = runner.addresses[0][1]
            q.state.bound = ("127.0.0.1", port)  # the Host header Chromium sends must be loopback's
            url = f"http://127.0.0.1:{port}/"
            dom = await asyncio.to_thread(chromium.dump_dom, url)
            png = await asyncio.to_thread(lambda: chromium.screenshot(url, tmp_path / "page.png", width=1280, height=1600))
            return dom, png
        finally:
            await runner.cleanup()

    dom, png = _with(tmp_path, go)
    assert "<h1>tuner daemon</h1>" in dom and 'data-target="default"' in dom
    row = re.search(r'<tr data-knob="effective_io_concurrency">(.*?)</tr>', dom)
    assert row is not None and ">256<" in row.group(1) and "applied" in row.group(1)
    assert "<svg" in dom and 'data-figure="history"' in dom
    assert png.stat().st_size > 20_000  # a rendered page, not a blank one (a blank 1280x1600 PNG is ~5 kB)


def test_the_page_lists_only_settings_its_families_tune(tmp_path: Path) -> None:
    async def go(q: Queries) -> str:
        target = q.state.targets["default"]
        target.cfg = load_config(None, overrides={"tuner": {"state_dir": str(tmp_path), "families": ["concurrency"]},
                                                  "target": {"dsn": "host=staging dbname=app"}})
        q.state.on_server["default"] = ("2026-12-06T10:00:00+00:00", {
            (EIC, None): 256, ("io_combine_limit", None): 16, ("commit_delay", None): 0,
            ("maintenance_io_concurrency", None): 10, ("read_ahead_kb", "/dev/sdb"): 4096})
        return await q.page()

    page = _with(tmp_path, go)
    assert 'data-knob="io_combine_limit"' in page  # concurrency's, read from the server
    for knob in ("commit_delay", "maintenance_io_concurrency", "read_ahead_kb"):  # no session was asked to tune
        assert f'data-knob="{knob}"' not in page


def _with_queries(sid: str) -> Report:
    """A newest session whose confirmation has a line per query (one statement of pg_stat_statements, with its
    share of read I/O; one of the operator's own, with its SET) and a statement left out."""
    base = make_report(sid, at=T0 + timedelta(days=3), current=256, recommended=256, decision="keep")
    rec = base.recommendations[0]
    assert rec.effect is not None
    effect = rec.effect.model_copy(update={"queries": [
        QueryEffect(name="q7", baseline_ms=80.0, candidate_ms=20.0, time_share=0.8, improvement=4.0,
                    ci95=(3.5, 4.6), decision_ci=(3.3, 4.8), n_pairs=6),
        QueryEffect(name="custom query 2", baseline_ms=20.0, candidate_ms=19.0, time_share=0.2, improvement=1.05,
                    ci95=(0.9, 1.2), decision_ci=(0.85, 1.3), n_pairs=6)]})
    families = [base.families[0].model_copy(update={"statements": [
        StatementOut(name="q7", queryid=7, text="SELECT count(*) FROM orders WHERE placed > $1", share=0.7),
        StatementOut(name="custom query 2", text="SET enable_indexscan = off; SELECT '<script>x</script>'")]})]
    return base.model_copy(update={
        "recommendations": [rec.model_copy(update={"effect": effect})], "families": families,
        "left_out": [LeftOutStatement(queryid=8, text="DELETE FROM orders WHERE id < $1", share=0.1,
                                      reason="writes")]})


async def _newest_with_queries(q: Queries) -> None:
    async with q.worker.store() as db:
        r = _with_queries("000000000004")
        await db.sessions.save(r, r.target.fingerprint or {})


def test_the_latest_sessions_per_query_lines_and_left_out_statements_are_on_the_page(tmp_path: Path) -> None:
    async def go(q: Queries) -> str:
        await _newest_with_queries(q)
        return await q.page()

    page = _with(tmp_path, go)
    part = page.split('<div data-part="queries">', 1)[1].split("</div></section>", 1)[0]
    assert "<h4>per query: effective_io_concurrency 256 -&gt; 256 (keep)</h4>" in part
    rows = re.findall(r"<tr><td>(.*?)</tr>", part)
    assert len(rows) == 2
    assert rows[0].startswith("q7 (queryid 7)<br><code>SELECT count(*) FROM orders WHERE placed &gt; $1</code>")
    assert "70% of read I/O" in rows[0] and "[3.50, 4.60]" in rows[0] and ">80.0<" in rows[0] and ">20.0<" in rows[0]
    assert "<code>SET enable_indexscan = off; SELECT &#x27;&lt;script&gt;x&lt;/script&gt;&#x27;</code>" in rows[1]
    assert "20% of time today" in rows[1] and "<script>" not in page
    assert "<li>left out: queryid 8 &#x27;DELETE FROM orders WHERE id &lt; $1&#x27; (10% of read I/O): writes</li>" \
        in part, part


def test_a_latest_session_without_per_query_lines_has_no_such_part(tmp_path: Path) -> None:
    assert 'data-part="queries"' not in _with(tmp_path, lambda q: q.page())


@needs_chromium
def test_the_per_query_lines_render_in_headless_chromium(tmp_path: Path) -> None:
    async def go(q: Queries) -> tuple[str, Path]:
        await _newest_with_queries(q)
        runner = make_runner(q)
        await runner.setup()
        try:
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            port = runner.addresses[0][1]
            q.state.bound = ("127.0.0.1", port)
            url = f"http://127.0.0.1:{port}/"
            dom = await asyncio.to_thread(chromium.dump_dom, url)
            png = await asyncio.to_thread(lambda: chromium.screenshot(url, tmp_path / "page.png", width=1280,
                                                                      height=1800))
            return dom, png
        finally:
            await runner.cleanup()

    dom, png = _with(tmp_path, go)
    assert 'data-part="queries"' in dom and "q7 (queryid 7)" in dom and "left out: queryid 8" in dom
    assert png.stat().st_size > 20_000
