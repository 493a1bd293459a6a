"""Feature: the web pages under /ui, served by `xihe serve` (see agent/web/ui)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from xihe.agent.audit import AuditEvent
from xihe.agent.feature import Context, Feature, Installed, Runtime
from xihe.agent.pending import MCP_PREFIX
from xihe.config.ui import UI_SECTION, UiConfig, is_loopback

if TYPE_CHECKING:  # starlette is imported by the routes, when `xihe serve` asks for them
    from starlette.routing import BaseRoute

log = logging.getLogger("xihe.ui")


def routes(app: Runtime) -> list[BaseRoute]:
    """Login, tasks, audit, alerts and pending confirmations (none when ui.yaml says enabled: false)."""
    from xihe.agent.web.ui.router import routes as ui_routes

    return ui_routes(app)


def end_refused_sessions(app: Runtime) -> None:
    """After a config reload: end the sessions of users the new config no longer lets in (removed from
    access.yaml, token changed, WeCom login turned off), on every replica at once (the store)."""
    from xihe.agent.web.ui.sessions import SessionStore, end_refused

    cfg = app.settings.get(UI_SECTION)
    config = cfg if isinstance(cfg, UiConfig) else UiConfig()
    deps = app.deps
    now = deps.clock()
    ended = end_refused(SessionStore(deps.engine), app.settings, config, now)
    if ended:
        deps.audit.record(
            AuditEvent(
                at=now,
                kind="web",
                actor=deps.holder,
                outcome="sessions_ended",
                reason="the reloaded configuration no longer lets these users in",
                detail={"sessions": [{"id": row.id, "user": row.user, "why": why} for row, why in ended]},
            )
        )


def warn_plain_cookies(app: Runtime) -> None:
    """At start: say so when the session cookie may travel over plain HTTP off loopback."""
    cfg = app.settings.get(UI_SECTION)
    listen = app.deps.listen
    if isinstance(cfg, UiConfig) and cfg.enabled and not cfg.secure_for(listen) and not is_loopback(listen):
        log.warning(
            "ui.yaml has cookie_secure: false while xihe serve listens on %s: web UI session cookies "
            "also travel over plain HTTP; serve behind TLS and set cookie_secure: auto (or true)",
            listen,
        )


def install(ctx: Context) -> Installed:
    """The pages are routes; a config reload re-checks the open sessions. When a ui.yaml user has a
    token, /mcp too (agent/web/mcp.py; the MCP SDK is imported only then)."""
    pages = Installed(routes=[routes], startup=[warn_plain_cookies], reloaded=[end_refused_sessions])
    from xihe.agent.mcp.auth import token_hashes

    if ctx.offline or not token_hashes(ctx.settings):
        return pages
    from xihe.agent.web.mcp import HttpMcp, late_message

    mcp = HttpMcp()
    pages.routes.append(mcp.routes)
    pages.contexts.append(mcp.running)
    pages.senders[MCP_PREFIX] = late_message
    return pages


FEATURE = Feature("web", UI_SECTION, install)
