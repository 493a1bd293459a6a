"""`xihe mcp serve`: xihe's MCP server over stdio, for a client that starts xihe itself (an IDE agent, a
desktop assistant). The caller is the ui.yaml user whose token is in `XIHE_MCP_TOKEN`; without a valid
one nothing is served. stdout carries the protocol only: logs go to stderr."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from xihe.agent.errors import BotError
from xihe.agent.mcp.auth import user_for
from xihe.agent.mcp.server import McpGateway, mcp_server

if TYPE_CHECKING:
    from xihe.agent.feature import Runtime

TOKEN_ENV = "XIHE_MCP_TOKEN"


class NotAuthenticated(BotError):
    """No token, or a token of no ui.yaml user."""


def stdio_user(app: Runtime, token: str | None) -> str:
    """The user `token` belongs to, or NotAuthenticated naming what to fix (never the token)."""
    if not token:
        raise NotAuthenticated(f"{TOKEN_ENV} is not set: set it to your xihe token (a ui.yaml user's token)")
    user = user_for(app.deps.settings, token)
    if user is None:
        McpGateway(app).refused_login("stdio")
        raise NotAuthenticated(f"{TOKEN_ENV} is not the token of any user in ui.yaml")
    return user


def serve_stdio(app: Runtime, user: str) -> None:
    """Serve one client on stdin/stdout until it closes them."""
    from mcp.server.stdio import stdio_server

    server = mcp_server(McpGateway(app), lambda _ctx: user)

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)
