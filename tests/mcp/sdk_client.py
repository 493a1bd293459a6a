"""The SDK's own MCP client, driven from blocking test code: one connection per call, like any client."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import httpx2
import mcp_types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

T = TypeVar("T")


def _run(url: str, token: str | None, go: Callable[[ClientSession], Awaitable[T]]) -> T:
    async def main() -> T:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as http,
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return await go(session)

    return anyio.run(main)


def list_tools(url: str, token: str | None) -> list[types.Tool]:
    async def go(session: ClientSession) -> list[types.Tool]:
        return list((await session.list_tools()).tools)

    return _run(url, token, go)


def call(url: str, token: str | None, name: str, **args: Any) -> types.CallToolResult:
    async def go(session: ClientSession) -> types.CallToolResult:
        return await session.call_tool(name, args)

    return _run(url, token, go)


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)
