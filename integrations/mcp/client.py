"""A blocking client of one MCP server (the official `mcp` SDK over stdio or Streamable HTTP).

Every call opens its own connection in a private event loop (`anyio.run`) on the calling thread and
is bounded by the server's timeout, so a worker thread of the bot can call it like any other client
and a server that is down, slow or goes away mid-call becomes an `McpError` with the reason, never a
hang or a crash of the bot.

    McpError              the root: the call did not give a result
    ├── McpUnavailable    cannot connect, timed out, or the connection broke mid-call
    └── McpProtocolError  the server answered something that is not MCP
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio

T = TypeVar("T")
MAX_RESULT_CHARS = 2_000_000  # what one answer may bring in; the executor caps it again and stores it
MAX_TOOLS = 500  # a server that lists more is cut here


class McpError(Exception):
    """An MCP call that did not give a result."""


class McpUnavailable(McpError):
    """The server cannot be reached, did not answer in time, or went away during the call."""


class McpProtocolError(McpError):
    """The server's answer is not valid MCP."""


@dataclass(frozen=True)
class Endpoint:
    """How to reach one server. `env`: extra variables for a stdio server (values already resolved);
    `token`: an HTTP server's bearer token. Neither is ever part of an error message."""

    name: str
    transport: str  # stdio | http
    command: tuple[str, ...] = ()
    url: str = ""
    env: dict[str, str] = field(default_factory=dict, repr=False)
    token: str | None = field(default=None, repr=False)
    timeout: float = 30.0


@dataclass(frozen=True)
class RemoteTool:
    """A tool as the server lists it (its annotations are hints, nothing more)."""

    name: str
    description: str
    input_schema: Any
    annotations: dict[str, Any]


@dataclass(frozen=True)
class RemoteResult:
    """A tool's answer: its text content joined, and whether the server flagged it as an error."""

    text: str
    is_error: bool


class McpClient:
    """list_tools() and call_tool() against one endpoint."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint

    def list_tools(self) -> list[RemoteTool]:
        async def go(session: Any) -> list[RemoteTool]:
            listed = await session.list_tools()
            return [
                RemoteTool(
                    t.name,
                    t.description or "",
                    t.input_schema,
                    t.annotations.model_dump(exclude_none=True) if t.annotations else {},
                )
                for t in listed.tools[:MAX_TOOLS]
            ]

        return self._run("listing tools", go)

    def call_tool(self, name: str, arguments: dict[str, Any]) -> RemoteResult:
        async def go(session: Any) -> RemoteResult:
            result = await session.call_tool(name, arguments)
            parts = []
            for block in result.content:
                text = getattr(block, "text", None)
                parts.append(text if isinstance(text, str) else f"[{getattr(block, 'type', 'content')}]")
            if not parts and result.structured_content is not None:
                import json

                parts.append(json.dumps(result.structured_content, ensure_ascii=False))
            text = "\n".join(parts)
            if len(text) > MAX_RESULT_CHARS:
                text = text[:MAX_RESULT_CHARS] + f"\n…[cut: the server sent {len(text):,} characters]"
            return RemoteResult(text, bool(result.is_error))

        return self._run(f"calling {name}", go)

    def _run(self, what: str, go: Callable[[Any], Awaitable[T]]) -> T:
        ep = self.endpoint

        statuses: list[int] = []  # the HTTP statuses of this call's requests (the SDK hides them)

        async def main() -> T:
            with anyio.fail_after(ep.timeout):
                async with self._session(statuses) as session:
                    return await go(session)

        try:
            return anyio.run(main)
        except TimeoutError:
            raise McpUnavailable(
                f"MCP server {ep.name}: no answer within {ep.timeout:g} s ({what})"
            ) from None
        except McpError:
            raise
        except BaseException as exc:  # an exception group from the SDK's task groups, OSError, ...
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise
            raise _translate(ep.name, what, exc, statuses) from None

    @asynccontextmanager
    async def _session(self, statuses: list[int]) -> AsyncIterator[Any]:
        from mcp import ClientSession

        async with self._streams(statuses) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session

    @asynccontextmanager
    async def _streams(self, statuses: list[int]) -> AsyncIterator[tuple[Any, Any]]:
        ep = self.endpoint
        if ep.transport == "stdio":
            from mcp.client.stdio import StdioServerParameters, stdio_client

            params = StdioServerParameters(command=ep.command[0], args=list(ep.command[1:]), env=dict(ep.env))
            with open(os.devnull, "w") as quiet:  # the server's own stderr chatter stays out of our logs
                async with stdio_client(params, errlog=quiet) as streams:
                    yield streams[0], streams[1]
            return
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        async def seen(response: httpx2.Response) -> None:
            statuses.append(response.status_code)

        headers = {"Authorization": f"Bearer {ep.token}"} if ep.token else {}
        client = httpx2.AsyncClient(
            headers=headers, timeout=httpx2.Timeout(ep.timeout), event_hooks={"response": [seen]}
        )
        async with (
            client as http,
            streamable_http_client(ep.url, http_client=http) as streams,
        ):
            yield streams[0], streams[1]


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]


def _translate(server: str, what: str, exc: BaseException, statuses: list[int]) -> McpError:
    """One clear error from whatever the SDK or the transport raised (never its arguments: no secrets)."""
    leaves = [e for e in _leaves(exc) if not isinstance(e, asyncio.CancelledError)] or [exc]
    first = leaves[0]
    name = type(first).__name__
    from mcp.shared.exceptions import MCPError

    failed = [s for s in statuses if s >= 400]
    if isinstance(first, MCPError) and failed:  # the SDK's stand-in for an HTTP error status
        status = failed[-1]
        if status in (401, 403):
            return McpProtocolError(
                f"MCP server {server} refused our credentials (HTTP {status}, {what}): check its token_env"
            )
        return McpUnavailable(
            f"MCP server {server} failed or went away during the call (HTTP {status}, {what})"
        )
    if isinstance(first, MCPError):
        return McpProtocolError(f"MCP server {server} refused {what}: {first.message} (code {first.code})")
    if isinstance(first, TimeoutError):
        return McpUnavailable(f"MCP server {server}: no answer in time ({what})")
    text = str(first).splitlines()[0][:200] if str(first) else ""
    detail = f"{name}: {text}" if text else name
    return McpUnavailable(f"MCP server {server} is unreachable or went away ({what}): {detail}")
