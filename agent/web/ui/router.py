"""The /ui routes: one page module each (login, tasks, audit, alerts, runs, pending, status) over shared Pages."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from xihe.agent.web.ui.alerts import Alerts
from xihe.agent.web.ui.audit import Audit
from xihe.agent.web.ui.login import Login
from xihe.agent.web.ui.page import Host, Pages
from xihe.agent.web.ui.pending import Pending
from xihe.agent.web.ui.runs import Runs
from xihe.agent.web.ui.status import Status
from xihe.agent.web.ui.tasks import Tasks

PAGES = (Login, Tasks, Audit, Alerts, Runs, Pending, Status)


def routes(app: Host) -> list[BaseRoute]:
    """The /ui routes, or none when ui.yaml turns the pages off."""
    ui = Pages(app)
    if not ui.config.enabled:
        return []
    return [Route("/", _to_ui), *(route for page in PAGES for route in page(ui).routes())]


async def _to_ui(request: Request) -> Response:
    """`GET /` (someone typed the host name): the pages live under /ui."""
    return RedirectResponse("/ui", status_code=302)
