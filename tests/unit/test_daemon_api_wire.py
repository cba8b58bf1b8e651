"""Issue 44, item 8: the API on the wire — raw requests a client library would never send, on a real socket: a
missing Host header, an absolute-form request line, deeply nested or huge-number bodies, and half-open
connections, which are dropped after the idle timeout instead of held forever."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web

from tuner.daemon import api
from tuner.daemon.api import body_problem, make_runner

from .test_daemon_api import TOKEN, Backend


async def _serving(backend: Backend, go: Callable[[int], Awaitable[Any]], *, idle_timeout_s: float = 15.0) -> Any:
    runner = make_runner(backend, idle_timeout_s=idle_timeout_s)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        return await go(port)
    finally:
        await runner.cleanup()


async def raw(port: int, request: bytes, timeout_s: float = 30.0) -> tuple[int, dict[str, Any] | str]:
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(request)
    await w.drain()
    data = await asyncio.wait_for(r.read(), timeout_s)
    w.close()
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split()[1])
    try:
        return status, json.loads(body)
    except ValueError:
        return status, body.decode(errors="replace")


def http(port: int, request: bytes) -> tuple[int, Any]:
    return asyncio.run(_serving(Backend(), lambda p: raw(p, request.replace(b"PORT", str(p).encode()))))


def post(body: bytes) -> bytes:
    return (b"POST /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\nAuthorization: Bearer " + TOKEN.encode() +
            b"\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
            str(len(body)).encode() + b"\r\n\r\n" + body)


def test_a_request_without_a_host_header_is_a_400() -> None:
    status, body = http(0, b"GET /v1/recommendations HTTP/1.0\r\n\r\n")
    assert status == 400 and body["error"] == "a request needs exactly one Host header"


def test_two_host_headers_are_a_400() -> None:
    status, _ = http(0, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n")
    assert status == 400


def test_an_absolute_form_request_line_is_a_400_whatever_its_authority() -> None:
    for target in (b"http://127.0.0.1:PORT/v1/recommendations", b"http://evil.example/v1/recommendations"):
        status, body = http(0, b"GET " + target + b" HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\nConnection: close\r\n\r\n")
        assert status == 400 and "origin-form" in body["error"], body


@pytest.mark.parametrize("body, said", [
    (b"[" * 10_000 + b"]" * 10_000, "nests deeper"),
    (b"[" * 100_000 + b"]" * 100_000, "larger than 64 KiB"),
    (b'{"target": ' + b"[" * 5000 + b"]" * 5000 + b"}", "nests deeper"),
    (b"1" * 20_000, "number longer"),
    (b'{"target": "default", "in_window": ' + b"9" * 20_000 + b"}", "number longer"),
    (b'{"families": [' + b"-" + b"1" * 5000 + b"]}", "number longer"),
])
def test_a_deep_or_huge_number_body_is_a_400_not_a_500(body: bytes, said: str) -> None:
    status, answer = http(0, post(body))
    assert status in (400, 413) and said in answer["error"], answer


def test_half_open_connections_are_dropped_after_the_idle_timeout() -> None:
    async def go(port: int) -> list[float]:
        async def one(payload: bytes) -> float:
            r, w = await asyncio.open_connection("127.0.0.1", port)
            if payload:
                w.write(payload)
                await w.drain()
            t = time.monotonic()
            await asyncio.wait_for(r.read(), 60)  # generous: a loaded machine may be slow, never this slow
            w.close()
            return time.monotonic() - t

        return await asyncio.gather(*(one(p) for p in [b"", b"GET /healthz HTTP/1.1\r\n", b"GET /he"] * 20))

    closed = asyncio.run(_serving(Backend(), go, idle_timeout_s=1.0))
    assert len(closed) == 60  # every one was closed by the server (read() returned at EOF)


def test_the_daemon_uses_a_finite_idle_timeout() -> None:
    assert 0 < api.IDLE_TIMEOUT_S <= 60 and 0 < api.BODY_TIMEOUT_S <= 60


@pytest.mark.parametrize("raw_body", [b'{"a": "[[[[[[[[[[[[[[[[[[[[[[[[["}', b'{"target": "x\\\\"}', b"{}"])
def test_brackets_and_digits_inside_strings_do_not_count(raw_body: bytes) -> None:
    assert body_problem(raw_body) is None
