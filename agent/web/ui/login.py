"""/ui/login (token), /ui/logout, and the way into the optional WeCom login."""

from __future__ import annotations

from pathlib import Path

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from xihe.agent.web import wecom_oauth
from xihe.agent.web.ui.auth import (
    COOKIE,
    PRELOGIN_COOKIE,
    Viewer,
    check_token,
    cross_site,
    login_refusal,
    prelogin_ok,
    prelogin_pair,
)
from xihe.agent.web.ui.login_audit import locked_out, login_failed
from xihe.agent.web.ui.page import HERE, Pages, read_form
from xihe.agent.web.ui.throttle import Lock, user_key


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
        nxt = safe_next(form.get("next") or request.query_params.get("next"))
        pre = ui.read_cookie(request, PRELOGIN_COOKIE)
        if request.method == "GET" or not pre:  # no form of ours was loaded: nothing to check or write
            return self._login_page(request, nxt, None, 200)
        now = ui.app.deps.clock()
        client = request.client.host if request.client else ""
        form_ok = not cross_site(request.headers) and prelogin_ok(ui.signer, pre, form.get("csrf"), now)
        user, token = form.get("user", "").strip(), form.get("token", "")
        tried = ui.throttles.begin(user_key(user) if form_ok else None, client, now, ui.config.login_throttle)
        if isinstance(tried, Lock):
            return self._locked(request, nxt, tried, user, "token")
        if not form_ok:
            login_failed(ui, tried, user, "login form without its CSRF token, or from another site", "token")
            return self._login_page(request, nxt, "The form expired; please try again.", 403)
        settings = ui.app.deps.settings
        fp = check_token(settings, ui.config, user, token) if user and token else None
        if fp is None or login_refusal(settings, ui.config, user, "token", fp) is not None:
            login_failed(ui, tried, user, "unknown user or wrong token", "token")
            return self._login_page(request, nxt, "Unknown user or wrong token.", 401)
        ui.throttles.succeeded(tried)
        ui.app.deps.metrics.ui_logins.labels(outcome="ok").inc()
        return ui.start_session(request, user, fp, "token", nxt)

    def _locked(self, request: Request, nxt: str, lock: Lock, user: str, via: str) -> Response:
        """429: this user id or address is locked out (audited once, when the lock starts)."""
        locked_out(self.ui, lock, user, via)
        until = self.ui.when(lock.until)
        what = "this user id" if lock.scope == "user" else "this address"
        response = self._login_page(
            request, nxt, f"Too many failed logins for {what}; try again after {until}.", 429
        )
        response.headers["Retry-After"] = str(
            max(1, int((lock.until - self.ui.app.deps.clock()).total_seconds()))
        )
        return response

    def _login_page(self, request: Request, nxt: str, error: str | None, status: int) -> Response:
        cookie, token = prelogin_pair(self.ui.signer, self.ui.app.deps.clock())
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
        self.ui.cookie(response, PRELOGIN_COOKIE, cookie, 3600)
        return response

    def logout(self, request: Request, viewer: Viewer, form: dict[str, str]) -> Response:
        """End the session in the store (every replica) and drop the cookie."""
        self.ui.sessions.end(self.ui.app.deps.clock(), "logout", session_id=viewer.session_id)
        self.ui.audit(viewer.user, "logout", "logged out of the web UI", session=viewer.session_id)
        response = RedirectResponse("/ui/login", status_code=303, headers=self.ui.headers)
        self.ui.drop_cookie(response, COOKIE)
        return response

    async def wecom_start(self, request: Request) -> Response:
        return await run_in_threadpool(wecom_oauth.start, self.ui, request)

    async def wecom_callback(self, request: Request) -> Response:
        return await run_in_threadpool(wecom_oauth.callback, self.ui, request)
