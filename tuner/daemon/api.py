"""The daemon's HTTP API (aiohttp): read-only by default, JSON bodies, bearer tokens where they are needed.

    GET  /                         a read-only page for people: targets, what is in force, the latest session,
                                   each knob over sessions (HTML, no script)
    GET  /healthz                  200 while the process serves (never needs a token)
    GET  /readyz                   200 once the scheduler runs and the store answers, else 503
    GET  /metrics                  Prometheus text format
    GET  /v1/recommendations       the accepted recommendations per target, in the report's JSON schema
                                   (with per_query: what each query of the workload gains, and left_out)
    GET  /v1/recommendations/NAME?format=FORMAT[&file=PATH]
                                   one target's accepted recommendations rendered by an emitter (conf, ansible, …):
                                   one file as text (FORMAT's only file, or PATH), else {"files": {path: text}}
    GET  /v1/sessions              the daemon's runs and the stored sessions, newest first
    GET  /v1/sessions/ID           one run and, once stored, its whole report (?format=html: the HTML report)
    GET  /v1/drift                 drift events, newest first, each with what changed from what to what
    POST /v1/sessions              run a session now, in or out of the window (or, with "in_window": true, in the
                                   next one): 202 with its id (token required)

A token is required for POST always (no ``token_file``: POST is off), and for every endpoint but /healthz when the
daemon listens on anything but loopback. Tokens are compared in constant time. Nothing the API returns holds a
password: reports keep DSNs redacted, and errors are tuner's own sentences.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import re
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from aiohttp import web

from tuner.errors import TunerError
from tuner.errors import StoreError
from tuner.log import get_logger

log = get_logger("tuner.daemon.api")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
OPEN = frozenset({"/healthz"})
# A client that connects and sends nothing, or half a request, is dropped after this long (aiohttp's keep-alive
# timer runs from the connection's start; its default is an hour, which lets a few hundred idle sockets hold the
# daemon's file descriptors).
IDLE_TIMEOUT_S = 15.0
BODY_TIMEOUT_S = 15.0  # a POST body that trickles in is refused (408) after this long
MAX_BODY_BYTES = 64 * 1024
MAX_DEPTH = 16  # a session request is a flat object; nesting deeper than this is not one
MAX_NUMBER_DIGITS = 64  # Python's int() refuses 4,300+ digits with a ValueError; nothing here needs more than a few


class Backend(Protocol):
    """What the API asks the daemon (see :class:`tuner.daemon.service.Daemon`)."""

    def token(self) -> str | None: ...
    def token_everywhere(self) -> bool: ...
    def loopback_hosts(self) -> frozenset[str] | None: ...
    def ready(self) -> tuple[bool, str]: ...
    def metrics(self) -> tuple[bytes, str]: ...
    async def recommendations(self, target: str | None) -> dict[str, Any]: ...
    async def rendered(self, target: str, fmt: str) -> dict[str, str]: ...
    async def page(self) -> str: ...
    async def session_html(self, session_id: str) -> str | None: ...
    async def sessions(self, limit: int) -> dict[str, Any]: ...
    async def session(self, session_id: str) -> dict[str, Any] | None: ...
    async def drift(self, limit: int) -> dict[str, Any]: ...
    async def request_session(self, body: dict[str, Any]) -> dict[str, Any]: ...


def _json(data: Any, status: int = 200) -> web.Response:
    return web.json_response(data, status=status, dumps=lambda d: json.dumps(d, default=str, indent=1))


def _problem(status: int, message: str, hint: str | None = None) -> web.Response:
    body = {"error": message} | ({"hint": hint} if hint else {})
    return _json(body, status)


# An HTML answer is tuner's own page or report: no script, styles inline, figures inline SVG. The policy says so to
# the browser, so that text from outside which got past the escaping still could not run or load anything.
HTML_POLICY = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'; "
               "frame-ancestors 'none'")
TEXT_TYPES = {".html": "text/html", ".json": "application/json"}  # by file name; anything else is text/plain


def _text(text: str, name: str, *, download_name: bool = True) -> web.Response:
    """A rendered file or page called ``name``: text/html for .html (with :data:`HTML_POLICY`), application/json for
    .json, text/plain otherwise; with ``download_name``, the name a browser saves it under."""
    suffix = name[name.rfind("."):] if "." in name else ""
    resp = web.Response(text=text, content_type=TEXT_TYPES.get(suffix, "text/plain"))
    resp.headers["X-Content-Type-Options"] = "nosniff"
    if suffix == ".html":
        resp.headers["Content-Security-Policy"] = HTML_POLICY
    if download_name:
        resp.headers["Content-Disposition"] = f'inline; filename="{name}"'
    return resp


def _limit(request: web.Request, default: int = 50) -> int:
    raw = request.query.get("limit", str(default))
    if not re.fullmatch(r"[0-9]{1,4}", raw) or not 1 <= int(raw) <= 1000:
        raise web.HTTPBadRequest(text=json.dumps({"error": "limit must be a whole number from 1 to 1000"}),
                                 content_type="application/json")
    return int(raw)


def body_problem(raw: bytes) -> str | None:
    """Why ``raw`` is not a JSON body this API reads (one sentence), or None. Depth and number length are checked
    before parsing: Python's json recurses (a deep body is a RecursionError) and int() refuses long numbers."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return "the body is not UTF-8 JSON"
    depth = deepest = 0
    in_string = escaped = False
    digits = 0
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
        digits = digits + 1 if ch.isdigit() else 0
        if deepest > MAX_DEPTH:
            return f"the body nests deeper than {MAX_DEPTH} levels"
        if digits > MAX_NUMBER_DIGITS:
            return f"the body has a number longer than {MAX_NUMBER_DIGITS} digits"
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return "the body is not JSON"
    return None


def build_app(backend: Backend) -> web.Application:
    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        if not request.raw_path.startswith("/"):
            # An absolute-form request line (GET http://host/path) is for proxies; its authority would stand in for
            # the Host header the checks below rely on (RFC 9112, section 3.2.2).
            return _problem(400, "this API takes origin-form request lines only (GET /path, not GET http://…)")
        given_host = request.headers.getall("Host", [])
        if len(given_host) != 1 or not given_host[0]:
            # Without a Host header aiohttp would use the socket's own address, which is loopback's (RFC 9112,
            # section 3.2: a request without exactly one Host is a 400).
            return _problem(400, "a request needs exactly one Host header", "send Host: 127.0.0.1:PORT")
        hosts = backend.loopback_hosts()
        if hosts is not None and given_host[0].lower() not in hosts:
            # On loopback, reads need no token: a Host header that is not loopback's is a browser tricked by DNS
            # rebinding into reading the API for a web page.
            return _problem(403, "this API answers only to a loopback Host header", "use http://127.0.0.1:PORT/")
        token = backend.token()
        needs = request.method not in ("GET", "HEAD") or (backend.token_everywhere() and request.path not in OPEN)
        if needs:
            if token is None:
                return _problem(403, "this daemon accepts no writes: it has no token_file",
                                "set [daemon] token_file and send Authorization: Bearer <token>")
            given = request.headers.get("Authorization", "")
            scheme, _, value = given.partition(" ")
            try:
                offered = value.strip().encode("utf-8")
            except UnicodeEncodeError:
                offered = b""
            if scheme.lower() != "bearer" or not hmac.compare_digest(offered, token.encode()):
                resp = _problem(401, "a valid bearer token is required", "send Authorization: Bearer <token>")
                resp.headers["WWW-Authenticate"] = 'Bearer realm="tuner"'
                return resp
        try:
            return await handler(request)
        except web.HTTPException:
            raise
        except StoreError as exc:
            return _problem(503, str(exc), exc.hint)
        except TunerError as exc:
            return _problem(getattr(exc, "http_status", 400), str(exc), exc.hint)
        except Exception as exc:  # a bug: one line to the client, the traceback in the log
            log.exception("api.error", path=request.path)
            return _problem(500, f"unexpected error: {type(exc).__name__}")

    async def healthz(request: web.Request) -> web.Response:
        return _json({"status": "ok"})

    async def readyz(request: web.Request) -> web.Response:
        ok, why = backend.ready()
        return _json({"status": "ready" if ok else "not ready", "detail": why}, 200 if ok else 503)

    async def metrics(request: web.Request) -> web.Response:
        body, content_type = backend.metrics()
        resp = web.Response(body=body)
        resp.headers["Content-Type"] = content_type
        return resp

    async def recommendations(request: web.Request) -> web.Response:
        return _json(await backend.recommendations(request.query.get("target")))

    async def rendered(request: web.Request) -> web.Response:
        fmt = request.query.get("format", "json")
        files = await backend.rendered(request.match_info["name"], fmt)
        wanted = request.query.get("file")
        if wanted is not None and wanted not in files:
            return _problem(404, f"format {fmt} has no file {wanted!r}", f"its files: {', '.join(files)}")
        if wanted is not None or len(files) == 1:
            name = wanted or next(iter(files))
            return _text(files[name], name)
        return _json({"files": files})

    async def index(request: web.Request) -> web.Response:
        return _text(await backend.page(), "index.html", download_name=False)

    async def sessions(request: web.Request) -> web.Response:
        return _json(await backend.sessions(_limit(request)))

    async def session(request: web.Request) -> web.Response:
        fmt = request.query.get("format", "json")
        if fmt not in ("json", "html"):
            return _problem(400, f"a session comes as json or html, not {fmt!r}", "use ?format=html or no format")
        if fmt == "html":
            page = await backend.session_html(request.match_info["id"])
            if page is None:
                return _problem(404, f"no stored session {request.match_info['id']}", "GET /v1/sessions lists them")
            return _text(page, f"report-{request.match_info['id']}.html")
        found = await backend.session(request.match_info["id"])
        if found is None:
            return _problem(404, f"no session {request.match_info['id']}", "GET /v1/sessions lists them")
        return _json(found)

    async def drift(request: web.Request) -> web.Response:
        return _json(await backend.drift(_limit(request, 100)))

    async def start(request: web.Request) -> web.Response:
        body: Any = {}
        if request.can_read_body:
            try:
                async with asyncio.timeout(BODY_TIMEOUT_S):
                    raw = await request.read()
            except TimeoutError:
                return _problem(408, f"the body did not arrive within {BODY_TIMEOUT_S:.0f} s")
            except web.HTTPRequestEntityTooLarge:
                return _problem(413, f"the body is larger than {MAX_BODY_BYTES // 1024} KiB",
                                'a request is a small object: {"target": "NAME", "families": [...]}')
            problem = body_problem(raw)
            if problem:
                return _problem(400, problem, 'send {} or {"target": "NAME", "families": [...]}')
            body = json.loads(raw)
            if not isinstance(body, dict):
                return _problem(400, "the body must be a JSON object", 'e.g. {"target": "default"}')
        queued = await backend.request_session(body)
        resp = _json(queued, 202)
        resp.headers["Location"] = f"/v1/sessions/{queued['id']}"
        return resp

    app = web.Application(middlewares=[guard], client_max_size=MAX_BODY_BYTES)
    app.router.add_get("/", index)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/v1/recommendations", recommendations)
    app.router.add_get("/v1/recommendations/{name}", rendered)
    app.router.add_get("/v1/sessions", sessions)
    app.router.add_post("/v1/sessions", start)
    app.router.add_get("/v1/sessions/{id}", session)
    app.router.add_get("/v1/drift", drift)
    return app


def make_runner(backend: Backend, *, idle_timeout_s: float = IDLE_TIMEOUT_S) -> web.AppRunner:
    """The API's runner: no access log, no signal handlers of its own (the daemon has them), and idle or
    half-open connections dropped after ``idle_timeout_s``."""
    return web.AppRunner(build_app(backend), access_log=None, handle_signals=False, keepalive_timeout=idle_timeout_s)
