"""Feature: the web pages under /ui, served by `xihe serve` (see agent/web/ui)."""

from __future__ import annotations

from starlette.routing import BaseRoute

from xihe.agent.feature import Context, Feature, Installed, Runtime
from xihe.config.ui import UI_SECTION


def routes(app: Runtime) -> list[BaseRoute]:
    """Login, tasks, audit, alerts and pending confirmations (none when ui.yaml says enabled: false)."""
    from xihe.agent.web.ui.router import routes as ui_routes

    return ui_routes(app)


def install(ctx: Context) -> Installed:
    """The pages are routes only."""
    return Installed(routes=[routes])


FEATURE = Feature("web", UI_SECTION, install)
