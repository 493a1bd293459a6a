"""`/mcp` under `xihe serve`: Streamable HTTP (the SDK's session manager, stateless, JSON answers) behind a
bearer-token check. A request without a token of a ui.yaml user gets 401 and is audited; the others run
as that user. The route exists only when some ui.yaml user has a token (`enabled`)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from xihe.agent.mcp.auth import bearer, token_hashes, user_for
from xihe.agent.mcp.server import McpGateway, mcp_server

if TYPE_CHECKING:
    from xihe.agent.feature import Runtime

USER_KEY = "xihe.mcp_user"


def enabled(app: Runtime) -> bool:
    """/mcp is served only when at least one ui.yaml user has a token (no anonymous access, ever)."""
    return bool(token_hashes(app.settings))


def _user_of(ctx: Any) -> str | None:
    request = getattr(ctx, "request", None)
    scope = getattr(request, "scope", None)
    return scope.get(USER_KEY) if isinstance(scope, dict) else None


class _Asgi:
    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


@dataclass
class HttpMcp:
    """The session manager, made by the route and run by the server's lifespan (`Installed.contexts`)."""

    manager: StreamableHTTPSessionManager | None = None
    gateways: list[McpGateway] = field(default_factory=list)

    def routes(self, app: Runtime) -> list[BaseRoute]:
        if not enabled(app):
            return []
        gateway = McpGateway(app)
        self.gateways.append(gateway)
        manager = StreamableHTTPSessionManager(
            mcp_server(gateway, _user_of),
            json_response=True,
            stateless=True,  # nothing lives between requests: any replica answers any call
            # the bearer token is the protection: a browser page cannot attach it (no cookie is used)
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        self.manager = manager

        async def serve(scope: Scope, receive: Receive, send: Send) -> None:
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
            token = bearer(headers.get("authorization"))
            user = await anyio.to_thread.run_sync(user_for, app.settings, token) if token else None
            if user is None:
                client = (scope.get("client") or ("?", 0))[0]
                await anyio.to_thread.run_sync(gateway.refused_login, str(client))
                response = JSONResponse(
                    {"error": "unauthorized", "detail": "send Authorization: Bearer <your xihe token>"},
                    status_code=401,
                    headers={"WWW-Authenticate": 'Bearer realm="xihe"'},
                )
                await response(scope, receive, send)
                return
            scope = dict(scope)
            scope[USER_KEY] = user
            scope["user"] = AuthenticatedUser(AccessToken(token="-", client_id=user, scopes=[]))
            await manager.handle_request(scope, receive, send)

        endpoint = _Asgi(serve)  # an ASGI app, not a request -> response function
        return [Route("/mcp", endpoint), Route("/mcp/", endpoint)]

    @contextlib.asynccontextmanager
    async def running(self, app: Runtime) -> AsyncIterator[None]:
        if self.manager is None:
            yield
            return
        async with self.manager.run():
            yield
