"""{base_url}mcp: the sidecar's Streamable HTTP endpoint behind Jupyter's authentication.

The handler authenticates the caller as any Jupyter API request (token in the Authorization header
or a login cookie plus XSRF), asks Jupyter's authorizer what the caller may do, and relays the
request to the sidecar on loopback with the internal token for exactly that grant. Responses are
streamed (SSE events are flushed one by one); Mcp-Session-Id and Last-Event-ID pass both ways.
"""

from __future__ import annotations

import json
from typing import Any

from jupyter_core.utils import ensure_async
from jupyter_server.base.handlers import APIHandler
from tornado import httputil, web
from tornado.http1connection import HTTP1Connection, HTTP1ConnectionParameters
from tornado.iostream import StreamClosedError
from tornado.tcpclient import TCPClient

from .sidecar import Sidecar, SidecarUnavailable

# Request headers the sidecar needs; everything else (cookies, the caller's Authorization,
# Origin, forwarding headers) stays here.
_REQUEST_HEADERS = (
    "Accept",
    "Content-Type",
    "Mcp-Session-Id",
    "Mcp-Protocol-Version",
    "Last-Event-ID",
    "User-Agent",
    "X-MCP-Toolsets",  # the toolsets a client chose for its session
)
_RESPONSE_HEADERS = (
    "Content-Type",
    "Mcp-Session-Id",
    "Mcp-Protocol-Version",
    "Cache-Control",
    "Retry-After",
    "Allow",
)
# Sidecar paths reachable below {base_url}mcp/ (the MCP endpoint itself is {base_url}mcp).
_SUBPATHS = {"healthz": "/healthz", "readyz": "/readyz"}


async def grant_for(handler: APIHandler) -> str | None:
    """The sidecar grant matching the caller's Jupyter permissions (see auth.ScopesFromJupyter)."""
    user = handler.current_user

    async def can(action: str, resource: str) -> bool:
        return bool(await ensure_async(handler.authorizer.is_authorized(handler, user, action, resource)))

    read = await can("read", "contents")
    write = await can("write", "contents")
    execute = await can("execute", "kernels")
    if write and execute and await can("write", "kernels"):
        return "admin"
    if write and execute:
        return "write+execute"
    if write:
        return "write"
    if execute:
        return "execute"
    return "read" if read else None


class MCPProxyHandler(APIHandler):
    """Relays /mcp to the sidecar (POST, GET SSE streams, DELETE)."""

    sidecar: Sidecar

    def initialize(self, sidecar: Sidecar) -> None:  # type: ignore[override]
        self.sidecar = sidecar
        self._upstream: Any = None

    def compute_etag(self) -> None:  # streamed, never cached
        return None

    def finish(self, *args: Any, **kwargs: Any) -> Any:
        # APIHandler.finish forces application/json; keep the sidecar's type (event streams).
        kwargs.setdefault("set_content_type", self._headers.get("Content-Type", "application/json"))
        return super().finish(*args, **kwargs)

    def on_connection_close(self) -> None:
        # The client went away (an abandoned SSE stream): drop the upstream request too.
        if self._upstream is not None:
            self._upstream.close()
        super().on_connection_close()

    @web.authenticated
    async def post(self, rest: str = "") -> None:
        await self._relay(rest)

    @web.authenticated
    async def get(self, rest: str = "") -> None:
        await self._relay(rest)

    @web.authenticated
    async def delete(self, rest: str = "") -> None:
        await self._relay(rest)

    async def _relay(self, rest: str) -> None:
        grant = await grant_for(self)
        if grant is None:
            raise web.HTTPError(403, "this Jupyter user may not read contents, so not use MCP either")
        if rest and rest not in _SUBPATHS:
            raise web.HTTPError(404)
        try:
            port, token = self.sidecar.endpoint(grant)
        except SidecarUnavailable as e:
            # Written here rather than raised: send_error would clear the Retry-After header.
            self.set_status(503)
            self.set_header("Retry-After", "2")
            self.finish(json.dumps({"message": str(e), "reason": "starting"}))
            return

        path = _SUBPATHS.get(rest, "/mcp")
        if self.request.query:
            path += "?" + self.request.query
        headers = httputil.HTTPHeaders()
        for name in _REQUEST_HEADERS:
            value = self.request.headers.get(name)
            if value is not None:
                headers[name] = value
        headers["Host"] = f"127.0.0.1:{port}"
        headers["Authorization"] = f"Bearer {token}"
        headers["Connection"] = "close"
        body = self.request.body or b""
        if body or self.request.method == "POST":
            headers["Content-Length"] = str(len(body))

        try:
            stream = await TCPClient().connect("127.0.0.1", port, timeout=10)
        except (OSError, StreamClosedError) as e:
            raise web.HTTPError(502, f"jupyter-collab-mcp is not reachable: {e}") from None
        self._upstream = stream
        conn = HTTP1Connection(
            stream,
            True,
            HTTP1ConnectionParameters(no_keep_alive=True, header_timeout=60, max_body_size=1 << 40),
        )
        relay = _Relay(self)
        try:
            conn.write_headers(httputil.RequestStartLine(self.request.method, path, "HTTP/1.1"), headers)
            if body:
                conn.write(body)
            conn.finish()
            await conn.read_response(relay)
        except (StreamClosedError, httputil.HTTPInputError, OSError) as e:
            if not relay.started:
                raise web.HTTPError(502, f"jupyter-collab-mcp failed: {e}") from None
        finally:
            stream.close()
            self._upstream = None
        if not relay.started and not self._finished:
            raise web.HTTPError(502, "jupyter-collab-mcp closed the connection without answering")


class _Relay(httputil.HTTPMessageDelegate):
    """Copies the sidecar's response into the handler's as it arrives."""

    def __init__(self, handler: MCPProxyHandler) -> None:
        self.h = handler
        self.started = False
        self.streaming = False

    def headers_received(
        self,
        start_line: httputil.RequestStartLine | httputil.ResponseStartLine,
        headers: httputil.HTTPHeaders,
    ) -> Any:
        assert isinstance(start_line, httputil.ResponseStartLine)
        h = self.h
        code = start_line.code
        if code in (401, 403):
            # Our internal token was refused: a server fault, not the caller's. Passing a 401 on
            # would also send MCP clients into an OAuth discovery they cannot complete.
            h.log.error("jupyter-collab-mcp refused the internal token (%d)", code)
            code = 502
        self.started = True
        h.set_status(code, start_line.reason if code == start_line.code else None)
        h.clear_header("Content-Type")
        for name in _RESPONSE_HEADERS:
            value = headers.get(name)
            if value is not None:
                h.set_header(name, value)
        self.streaming = headers.get("Content-Type", "").startswith("text/event-stream")
        if self.streaming:
            h.set_header("X-Accel-Buffering", "no")  # nginx and friends: do not hold events back
            return self._flush()
        return None

    def data_received(self, chunk: bytes) -> Any:
        self.h.write(chunk)
        if self.streaming:
            return self._flush()
        return None

    async def _flush(self) -> None:
        try:
            await self.h.flush()
        except StreamClosedError:
            # The client is gone; stop reading from the sidecar.
            if self.h._upstream is not None:
                self.h._upstream.close()

    def finish(self) -> None:
        pass

    def on_connection_close(self) -> None:
        pass
