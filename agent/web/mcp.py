"""`/mcp` under `xihe serve`: xihe's MCP server (agent/mcp/) over Streamable HTTP (the SDK's session
manager, stateless, JSON answers) behind a bearer-token check. A request without a token of a ui.yaml
user gets 401 and is audited; the others run as that user. Wrong tokens count against the client's
address in the web login's throttle (the store's, shared by every replica and by `/ui/login`): past
`login_throttle.client_failures` in the window, the address gets 429 until the lockout ends, even with
a right token. The route exists only when some ui.yaml user has a token (`enabled`)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from xihe.agent.audit import AuditEvent
from xihe.agent.mcp.auth import bearer, token_hashes, user_for
from xihe.agent.mcp.server import McpGateway, mcp_server
from xihe.agent.web.ui.throttle import Lock, LoginThrottles
from xihe.config.ui import UI_SECTION, UiConfig

if TYPE_CHECKING:
    from xihe.agent.feature import Runtime

USER_KEY = "xihe.mcp_user"
log = logging.getLogger("xihe.mcp")


def enabled(app: Runtime) -> bool:
    """/mcp is served only when at least one ui.yaml user has a token (no anonymous access, ever);
    decided when `xihe serve` starts."""
    return bool(token_hashes(app.deps.settings))


def _user_of(ctx: Any) -> str | None:
    request = getattr(ctx, "request", None)
    scope = getattr(request, "scope", None)
    return scope.get(USER_KEY) if isinstance(scope, dict) else None


def late_message(conversation: str, text: str) -> None:
    """Late messages for `mcp:<user>` (a run's progress) have no chat to go to: the client asks
    `xihe_action_status`, the run's end is on its web page."""
    log.debug("no late messages for MCP conversations (%s)", conversation)


def _audit_lock(app: Runtime, lock: Lock, client: str) -> None:
    app.deps.audit.record(
        AuditEvent(
            at=app.deps.clock(),
            kind="mcp",
            actor="-",
            outcome="locked_out" if lock.new else "refused_locked",
            reason=f"{lock.failures} failed tokens from this address; locked until {lock.until.isoformat()}",
            detail={"channel": "mcp", "client": client},
        )
    )


class _Asgi:
    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


@dataclass
class HttpMcp:
    """The session manager, made by the route and run by the server's lifespan (`Installed.contexts`)."""

    manager: StreamableHTTPSessionManager | None = None

    def routes(self, app: Runtime) -> list[BaseRoute]:
        if not enabled(app):
            return []
        gateway = McpGateway(app)
        manager = StreamableHTTPSessionManager(
            mcp_server(gateway, _user_of),
            json_response=True,
            stateless=True,  # nothing lives between requests: any replica answers any call
            # the bearer token is the protection: a browser page cannot attach it (no cookie is used)
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        self.manager = manager

        throttles = LoginThrottles(app.deps.engine)

        def check(token: str | None, client: str) -> str | Lock | None:
            """The caller's user, the lock that refuses this address, or None (audited)."""
            settings = app.deps.settings  # the live config: a reload that changes a token counts at once
            cfg = settings.get(UI_SECTION)
            policy = (cfg if isinstance(cfg, UiConfig) else UiConfig()).login_throttle
            now = app.deps.clock()
            tried = throttles.begin(None, client, now, policy)
            if isinstance(tried, Lock):
                _audit_lock(app, tried, client)
                return tried
            user = user_for(settings, token) if token else None
            if user is not None:
                throttles.succeeded(tried)
                return user
            gateway.refused_login(client)
            for lock in throttles.failed(tried, now, policy):
                _audit_lock(app, lock, client)
            return None

        async def serve(scope: Scope, receive: Receive, send: Send) -> None:
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
            token = bearer(headers.get("authorization"))
            client = str((scope.get("client") or ("-", 0))[0])
            user = await anyio.to_thread.run_sync(check, token, client)
            if isinstance(user, Lock):
                seconds = max(1, int((user.until - app.deps.clock()).total_seconds()))
                body = {"error": "too many failed tokens from this address", "retry_after_seconds": seconds}
                await JSONResponse(body, status_code=429, headers={"Retry-After": str(seconds)})(
                    scope, receive, send
                )
                return
            if user is None:
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
