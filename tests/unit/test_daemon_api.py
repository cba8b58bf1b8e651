"""The daemon's HTTP API and metrics as pure logic: routes, bearer tokens, bad requests, the Prometheus text.
The backend here is a plain object with canned answers (the daemon's own backend is tested against real
PostgreSQL in tests/integration/test_daemon.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families

from tuner.daemon.api import build_app
from tuner.daemon.metrics import Metrics
from tuner.report.model import EffectOut, Recommendation

TOKEN = "0123456789abcdef0123"


class Backend:
    def __init__(self, token: str | None = TOKEN, everywhere: bool = False) -> None:
        self._token, self._everywhere = token, everywhere
        self.requested: list[dict[str, Any]] = []
        self.hosts: frozenset[str] | None = None
        self.m = Metrics()

    def token(self) -> str | None:
        return self._token

    def token_everywhere(self) -> bool:
        return self._everywhere

    def loopback_hosts(self) -> frozenset[str] | None:
        return None if self._everywhere else self.hosts

    def ready(self) -> tuple[bool, str]:
        return True, "idle"

    def metrics(self) -> tuple[bytes, str]:
        return self.m.render(), self.m.content_type

    async def recommendations(self, target: str | None) -> dict[str, Any]:
        return {"targets": [{"target": target or "default", "recommendations": []}]}

    async def rendered(self, target: str, fmt: str) -> dict[str, str]:
        return {"recommendation.sql": "ALTER SYSTEM SET effective_io_concurrency = 64;\n"}

    async def sessions(self, limit: int) -> dict[str, Any]:
        return {"runs": [], "sessions": [], "limit": limit}

    async def session(self, session_id: str) -> dict[str, Any] | None:
        return None

    async def drift(self, limit: int) -> dict[str, Any]:
        return {"events": []}

    async def request_session(self, body: dict[str, Any]) -> dict[str, Any]:
        self.requested.append(body)
        return {"id": "abcdef012345", "status": "queued"}


def call(backend: Backend, method: str, path: str, **kw: Any) -> tuple[int, Any, dict[str, str]]:
    async def go() -> tuple[int, Any, dict[str, str]]:
        async with TestClient(TestServer(build_app(backend))) as client:
            resp = await client.request(method, path, **kw)
            body = await (resp.json() if resp.content_type == "application/json" else resp.text())
            return resp.status, body, dict(resp.headers)

    return asyncio.run(go())


def auth(token: str = TOKEN) -> dict[str, dict[str, str]]:
    return {"headers": {"Authorization": f"Bearer {token}"}}


def test_reads_are_open_on_loopback_and_post_needs_the_token() -> None:
    b = Backend()
    assert call(b, "GET", "/healthz")[0] == 200
    assert call(b, "GET", "/v1/recommendations")[0] == 200
    status, body, headers = call(b, "POST", "/v1/sessions", json={})
    assert status == 401 and body["error"] == "a valid bearer token is required" and "Bearer" in headers["WWW-Authenticate"]
    assert call(b, "POST", "/v1/sessions", json={}, **auth("x" * 20))[0] == 401
    assert call(b, "POST", "/v1/sessions", json={}, headers={"Authorization": f"Basic {TOKEN}"})[0] == 401
    status, body, headers = call(b, "POST", "/v1/sessions", json={"target": "default"}, **auth())
    assert status == 202 and body["id"] == "abcdef012345" and headers["Location"] == "/v1/sessions/abcdef012345"
    assert b.requested == [{"target": "default"}]


def test_without_a_token_file_post_is_off() -> None:
    status, body, _ = call(Backend(token=None), "POST", "/v1/sessions", json={})
    assert status == 403 and "no token_file" in body["error"] and "token_file" in body["hint"]


@pytest.mark.parametrize("path", ["/readyz", "/metrics", "/v1/recommendations", "/v1/sessions", "/v1/drift",
                                  "/v1/sessions/abc", "/v1/recommendations/default"])
def test_off_loopback_every_endpoint_but_healthz_needs_the_token(path: str) -> None:
    b = Backend(everywhere=True)
    assert call(b, "GET", path)[0] == 401
    assert call(b, "GET", path, **auth())[0] in (200, 404)
    assert call(b, "GET", "/healthz")[0] == 200


def test_bad_requests_get_one_sentence() -> None:
    b = Backend()
    status, body, _ = call(b, "POST", "/v1/sessions", data=b"{not json", **auth())
    assert status == 400 and body["error"] == "the body is not JSON"
    status, body, _ = call(b, "POST", "/v1/sessions", json=[1, 2], **auth())
    assert status == 400 and "JSON object" in body["error"]
    status, body, _ = call(b, "GET", "/v1/sessions?limit=0")
    assert status == 400 and body["error"] == "limit must be a whole number from 1 to 1000"
    status, body, _ = call(b, "GET", "/v1/sessions/0123456789ab")
    assert status == 404 and body["error"] == "no session 0123456789ab"
    assert call(b, "GET", "/v1/nothing")[0] == 404


def test_a_single_rendered_file_comes_as_text() -> None:
    status, body, headers = call(Backend(), "GET", "/v1/recommendations/default?format=sql")
    assert status == 200 and body.startswith("ALTER SYSTEM") and "recommendation.sql" in headers["Content-Disposition"]
    assert call(Backend(), "GET", "/v1/recommendations/default?format=sql&file=recommendation.sql")[1] == body
    status, body, _ = call(Backend(), "GET", "/v1/recommendations/default?format=sql&file=nope.sql")
    assert status == 404 and body["hint"] == "its files: recommendation.sql"


def _rec(knob: str, value: int, improvement: float | None, obj: str | None = None) -> Recommendation:
    effect = None if improvement is None else EffectOut(
        metric="execution_time_ms", improvement=improvement, ci95=(improvement - 0.1, improvement + 0.1),
        decision_ci=(improvement - 0.15, improvement + 0.15), n_pairs=8, p_value=0.01, looks=1, method="t")
    return Recommendation(knob=knob, scope="system" if obj is None else "device", object=obj, current=1,
                          recommended=value, near_optimal=None, decision="change", reason="r", effect=effect,
                          requires="reload")


def samples(m: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(m.render().decode()) for s in fam.samples}


def test_metrics_parse_with_prometheus_own_parser_and_withdrawn_recommendations_disappear() -> None:
    m = Metrics()
    m.target("default")
    m.set_recommendations("default", [_rec("effective_io_concurrency", 64, 1.3), _rec("read_ahead_kb", 512, 1.1, "/dev/sdb")])
    m.set_recommendations("other", [_rec("effective_io_concurrency", 8, None)])
    s = samples(m)
    eic = ("knob", "effective_io_concurrency"), ("object", ""), ("target", "default")
    assert s[("tuner_recommended_setting", eic)] == 64
    assert s[("tuner_improvement_ratio", eic)] == pytest.approx(1.3)
    assert s[("tuner_ci95_low", eic)] == pytest.approx(1.2) and s[("tuner_ci95_high", eic)] == pytest.approx(1.4)
    assert s[("tuner_recommended_setting", (("knob", "read_ahead_kb"), ("object", "/dev/sdb"), ("target", "default")))] == 512
    assert s[("tuner_config_last_reload_successful", ())] == 1
    assert s[("tuner_session_running", (("target", "default"),))] == 0
    assert s[("tuner_drift_events_total", (("target", "default"),))] == 0
    m.set_recommendations("default", [])
    s = samples(m)
    assert not any(k[0] == "tuner_recommended_setting" and ("target", "default") in k[1] for k in s)
    assert s[("tuner_recommended_setting", (("knob", "effective_io_concurrency"), ("object", ""), ("target", "other")))] == 8


def test_on_loopback_a_foreign_host_header_is_refused_and_head_is_a_read() -> None:
    b = Backend()
    b.hosts = frozenset({"localhost", "127.0.0.1"})
    status, body, _ = call(b, "GET", "/v1/recommendations", headers={"Host": "attacker.example"})
    assert status == 403 and "loopback Host header" in body["error"]
    assert call(b, "GET", "/v1/recommendations", headers={"Host": "127.0.0.1"})[0] == 200
    assert call(b, "HEAD", "/healthz", headers={"Host": "localhost"})[0] == 200


def test_odd_authorization_and_limits_are_refused_not_crashed() -> None:
    b = Backend()
    assert call(b, "POST", "/v1/sessions", json={}, headers={"Authorization": "Bearer \udcff\udcfe"})[0] in (400, 401)
    assert call(b, "GET", "/v1/sessions?limit=\u00b2")[0] == 400
