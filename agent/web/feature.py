"""Feature: the web pages under /ui, served by `xihe serve` (see agent/ui)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.routing import BaseRoute

if TYPE_CHECKING:
    from xihe.agent.app import App


def routes(app: App) -> list[BaseRoute]:
    """Login, tasks, audit, alerts and pending confirmations (none when ui.yaml says enabled: false)."""
    from xihe.agent.web.ui.router import routes as ui_routes

    return ui_routes(app)
