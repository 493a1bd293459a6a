"""/ui/login (token), /ui/logout, and the way into the optional WeCom login."""

from __future__ import annotations

import secrets
from pathlib import Path

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from xihe.agent.web import wecom_oauth
from xihe.agent.web.ui.auth import COOKIE, PRELOGIN_COOKIE, Viewer, check_token, csrf_ok
from xihe.agent.web.ui.page import HERE, SECURITY_HEADERS, Pages, read_form


def safe_next(value: str | None) -> str:
    """Only local /ui paths (never '//host' or a scheme) are followed after login."""
    if value and value.startswith("/ui") and not value.startswith("//") and "\\" not in value:
        return value
    return "/ui/tasks"


class Login:
    """Token login, logout, the WeCom login's two steps, the stylesheet."""

    def __init__(self, ui: Pages, css: Path = HERE / "static" / "ui.css") -> None:
        self.ui = ui
        self.css = css.read_text(encoding="utf-8")

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/ui", self.home),
            Route("/ui/", self.home),
            Route("/ui/static/ui.css", self.static_css),
            Route("/ui/login", self.login, methods=["GET", "POST"]),
            Route("/ui/login/wecom", self.wecom_start),
            Route("/ui/login/wecom/callback", self.wecom_callback),
            Route("/ui/logout", self.ui.page(self.logout), methods=["POST"]),
        ]

    async def home(self, request: Request) -> Response:
        return RedirectResponse("/ui/tasks", status_code=303)

    async def static_css(self, request: Request) -> Response:
        return Response(self.css, media_type="text/css", headers={"Cache-Control": "max-age=300"})

    async def login(self, request: Request) -> Response:
        form = await read_form(request)
        return await run_in_threadpool(self._login, request, form)

    def _login(self, request: Request, form: dict[str, str]) -> Response:
        ui = self.ui
        pre = request.cookies.get(PRELOGIN_COOKIE)
        nxt = safe_next(form.get("next") or request.query_params.get("next"))
        if request.method == "GET" or not pre:
            return self._login_page(request, nxt, None, 200)
        if not csrf_ok(pre, form.get("csrf")):
            ui.audit(form.get("user", "")[:120] or "-", "csrf_refused", "login form without its CSRF token")
            return self._login_page(request, nxt, "The form expired; please try again.", 403)
        user, token = form.get("user", "").strip(), form.get("token", "")
        fp = check_token(ui.app.deps.settings, ui.config, user, token) if user and token else None
        if fp is None:
            ui.audit(
                user[:120] or "-",
                "login_failed",
                "unknown user or wrong token",
                via="token",
                client=request.client.host if request.client else "",
            )
            return self._login_page(request, nxt, "Unknown user or wrong token.", 401)
        return ui.start_session(request, user, fp, "token", nxt)

    def _login_page(self, request: Request, nxt: str, error: str | None, status: int) -> Response:
        token = secrets.token_urlsafe(24)
        response = self.ui.render(
            request,
            "login.html",
            None,
            status,
            csrf=token,
            next=nxt,
            error=error,
            wecom=self.ui.config.wecom_oauth.enabled,
        )
        self.ui.cookie(response, PRELOGIN_COOKIE, token, 3600)
        return response

    def logout(self, request: Request, viewer: Viewer, form: dict[str, str]) -> Response:
        self.ui.audit(viewer.user, "logout", "logged out of the web UI")
        response = RedirectResponse("/ui/login", status_code=303, headers=SECURITY_HEADERS)
        response.delete_cookie(COOKIE, path="/ui")
        return response

    async def wecom_start(self, request: Request) -> Response:
        return await run_in_threadpool(wecom_oauth.start, self.ui, request)

    async def wecom_callback(self, request: Request) -> Response:
        return await run_in_threadpool(wecom_oauth.callback, self.ui, request)
