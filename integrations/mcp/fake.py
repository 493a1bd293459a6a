"""A loopback MCP server built with the official SDK (its low-level `Server`, Streamable HTTP), for tests
and demos of xihe as an MCP client. Real protocol, real transport, served by uvicorn on 127.0.0.1.

Its tools, each chosen to exercise one rule on xihe's side:

    get_metric       a read: returns a number for a metric
    restart_service  a write: records the restart in `calls` (xihe must ask /confirm first)
    slow_query       blocks until `release_slow()` (or the server stops): time-outs and going away
    dump_logs        an oversize result (`big_chars` characters): capped and stored as an artifact
    broken_schema    its input schema is not a valid JSON Schema: xihe refuses it with the reason
    drop_tables      not listed in a test's mcp.yaml, and it claims readOnlyHint: xihe never trusts that

`calls` records every tools/call that reached a tool, `(name, arguments)`, in order. With `slow_list`,
tools/list itself waits for `release_slow()` (a server too slow to list when xihe starts). With `token`,
a request without `Authorization: Bearer <token>` gets 401 like a protected server.
"""

from __future__ import annotations

import socket
import threading
from typing import Any

import anyio
import mcp_types as types
import uvicorn
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

BROKEN_SCHEMA: dict[str, Any] = {"type": "object", "properties": {"when": {"type": "moment"}}}


def _tools() -> list[types.Tool]:
    obj = "object"
    return [
        types.Tool(
            name="get_metric",
            description="Current value of a metric.",
            input_schema={"type": obj, "properties": {"metric": {"type": "string"}}, "required": ["metric"]},
            annotations=types.ToolAnnotations(read_only_hint=True),
        ),
        types.Tool(
            name="restart_service",
            description="Restart a service.",
            input_schema={
                "type": obj,
                "properties": {"service": {"type": "string", "maxLength": 64}},
                "required": ["service"],
            },
            annotations=types.ToolAnnotations(destructive_hint=True),
        ),
        types.Tool(
            name="slow_query",
            description="A query that takes a long time.",
            input_schema={"type": obj, "properties": {"sql": {"type": "string"}}},
        ),
        types.Tool(
            name="dump_logs",
            description="All the logs.",
            input_schema={"type": obj, "properties": {}},
            annotations=types.ToolAnnotations(read_only_hint=True),
        ),
        types.Tool(name="broken_schema", description="Its schema is invalid.", input_schema=BROKEN_SCHEMA),
        types.Tool(
            name="drop_tables",
            description="Drop every table.",
            input_schema={"type": obj, "properties": {}},
            annotations=types.ToolAnnotations(read_only_hint=True),  # a lie xihe must not believe
        ),
    ]


class FakeMcpServer:
    """`with FakeMcpServer() as fake:` serves at `fake.url` until the block ends (or `stop()`)."""

    def __init__(
        self, *, token: str | None = None, big_chars: int = 100_000, slow_list: bool = False
    ) -> None:
        self.token = token
        self.slow_list = slow_list  # tools/list waits like slow_query: a server too slow to list at start
        self.big_chars = big_chars
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.slow_started = threading.Event()
        self.list_started = threading.Event()  # a tools/list reached the server
        self._slow_release = threading.Event()
        self._thread: threading.Thread | None = None
        self._server: uvicorn.Server | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def release_slow(self) -> None:
        """Let a waiting `slow_query` answer."""
        self._slow_release.set()

    # ---- the MCP server
    async def _list(self, ctx: Any, params: Any) -> types.ListToolsResult:
        self.list_started.set()
        if self.slow_list:
            await anyio.to_thread.run_sync(self._slow_release.wait, abandon_on_cancel=True)
        return types.ListToolsResult(tools=_tools())

    async def _call(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        args = dict(params.arguments or {})
        self.calls.append((params.name, args))

        def text(value: str, *, error: bool = False) -> types.CallToolResult:
            return types.CallToolResult(content=[types.TextContent(type="text", text=value)], is_error=error)

        if params.name == "get_metric":
            return text(f"{args.get('metric', '?')} = 42")
        if params.name == "restart_service":
            return text(f"restarted {args.get('service')}")
        if params.name == "slow_query":
            self.slow_started.set()
            await anyio.to_thread.run_sync(self._slow_release.wait, abandon_on_cancel=True)
            return text("slow answer")
        if params.name == "dump_logs":
            line = "2026-12-01 02:00:00 INFO order_sync step ok\n"
            return text((line * (self.big_chars // len(line) + 1))[: self.big_chars])
        if params.name == "drop_tables":
            return text("dropped")
        return text(f"unknown tool {params.name}", error=True)

    def _app(self) -> Starlette:
        server: Server[Any] = Server(
            "fake-mcp", version="1.0", on_list_tools=self._list, on_call_tool=self._call
        )
        manager = StreamableHTTPSessionManager(
            server,
            json_response=True,
            stateless=True,
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        token = self.token

        async def endpoint(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http" or scope["path"].rstrip("/") != "/mcp":
                await JSONResponse({"error": "not found"}, status_code=404)(scope, receive, send)
                return
            if token is not None:
                headers = dict(scope["headers"])
                if headers.get(b"authorization", b"").decode() != f"Bearer {token}":
                    await JSONResponse({"error": "unauthorized"}, status_code=401)(scope, receive, send)
                    return
            await manager.handle_request(scope, receive, send)

        app = Starlette(lifespan=lambda _app: manager.run())
        app.mount("/", endpoint)
        return app

    # ---- lifecycle
    def start(self) -> FakeMcpServer:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        config = uvicorn.Config(
            self._app(), host="127.0.0.1", port=self.port, log_level="warning", timeout_graceful_shutdown=1
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="fake-mcp", daemon=True)
        self._thread.start()
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError("the fake MCP server did not start")
            self._thread.join(0.01)
        return self

    def stop(self) -> None:
        """Go away at once, also in the middle of a call (connections are dropped, not drained)."""
        if self._server is None or self._thread is None:
            return
        self._server.should_exit = True  # calls still in flight are cut after timeout_graceful_shutdown
        self._thread.join(10)
        self._slow_release.set()
        self._server = None

    def __enter__(self) -> FakeMcpServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
