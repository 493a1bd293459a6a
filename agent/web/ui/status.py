"""/ui/readyz: the readiness reasons in full (feature problems, the refused reload's file and line),
for admins only; the anonymous /readyz names no paths or secrets."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from xihe.agent.web.server import readiness_body
from xihe.agent.web.ui.auth import Viewer
from xihe.agent.web.ui.page import Pages


class Status:
    """Admins see why this replica is not ready."""

    def __init__(self, ui: Pages) -> None:
        self.ui = ui

    def routes(self) -> list[BaseRoute]:
        return [Route("/ui/readyz", self.ui.page(self.readyz))]

    def readyz(self, request: Request, viewer: Viewer, form: dict[str, str]) -> Response:
        if not viewer.admin:
            return JSONResponse({"error": "admins only"}, status_code=403, headers=self.ui.headers)
        body, status = readiness_body(self.ui.app, detailed=True)
        return JSONResponse(body, status_code=status, headers=self.ui.headers)
