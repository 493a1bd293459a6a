"""Optional "log in with WeCom": OAuth2 `snsapi_base`, so the user id is the one WeCom verifies.

Flow: /ui/login/wecom redirects to WeCom's authorize page with a random `state` that is also kept in
a signed cookie; WeCom sends the browser back to `redirect_base`/ui/login/wecom/callback?code=…&state=…
(the configured public address, never the request's Host header); the state must match the cookie
(login CSRF), then the WeCom app client (`gettoken` + `auth/getuserinfo`) turns the code into a userid.
Only users listed in access.yaml (or any user when `unknown_user_roles` grants something) get in.
Callbacks count against the client address's login throttle like failed token logins.
"""

from __future__ import annotations

import secrets
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from xihe.agent.errors import WeComError
from xihe.agent.web.ui.auth import csrf_ok, login_refusal
from xihe.agent.web.ui.login_audit import locked_out, login_failed
from xihe.agent.web.ui.page import Pages
from xihe.agent.web.ui.throttle import Attempt, Lock
from xihe.integrations.wecom.app_client import AppClient

STATE_COOKIE = "xihe_ui_oauth"


class OAuthError(Exception):
    """WeCom refused or the reply was not what the API documents."""


def _redirect_uri(ui: Pages) -> str:
    """ui.yaml requires redirect_base whenever the WeCom login is on."""
    return f"{ui.config.wecom_oauth.redirect_base.rstrip('/')}/ui/login/wecom/callback"


def start(ui: Pages, request: Request) -> Response:
    """Send the browser to WeCom's authorize page."""
    cfg = ui.config.wecom_oauth
    corp_id = ui.app.deps.settings.secret(cfg.corp_id_env)
    if not cfg.enabled or not corp_id:
        return RedirectResponse("/ui/login", status_code=303)
    state = secrets.token_urlsafe(16)
    query = {
        "appid": corp_id,
        "redirect_uri": _redirect_uri(ui),
        "response_type": "code",
        "scope": "snsapi_base",
        "state": state,
    }
    if cfg.agent_id is not None:
        query["agentid"] = str(cfg.agent_id)
    response = RedirectResponse(f"{cfg.authorize_url}?{urlencode(query)}#wechat_redirect", status_code=303)
    ui.cookie(response, STATE_COOKIE, ui.signer.dumps("oauth", {"s": state}), 600)
    return response


def user_of_code(ui: Pages, code: str) -> str:
    """The verified WeCom userid of an OAuth code."""
    cfg = ui.config.wecom_oauth
    settings = ui.app.deps.settings
    client = AppClient(
        settings.secret(cfg.corp_id_env) or "",
        settings.secret(cfg.secret_env) or "",
        cfg.agent_id or 0,
        api_base=cfg.api_base,
        attempts=1,  # a person is waiting on the login page
    )
    try:
        return client.user_of_oauth_code(code)
    except WeComError as exc:
        raise OAuthError(str(exc)) from None


def _refused(
    ui: Pages,
    request: Request,
    tried: Attempt,
    status: int,
    title: str,
    message: str,
    reason: str,
    user: str = "",
) -> Response:
    login_failed(ui, tried, user or None, reason, "wecom", verified=bool(user))
    return ui.render(request, "error.html", None, status, title=title, message=message)


def callback(ui: Pages, request: Request) -> Response:
    """Check the state, resolve the code, start a session."""
    cfg = ui.config.wecom_oauth
    if not cfg.enabled:
        return RedirectResponse("/ui/login", status_code=303)
    client = request.client.host if request.client else ""
    tried = ui.throttles.begin(None, client, ui.app.deps.clock(), ui.config.login_throttle)
    if isinstance(tried, Lock):
        locked_out(ui, tried, None, "wecom")
        message = f"Too many failed logins from this address; try again after {ui.when(tried.until)}."
        return ui.render(request, "error.html", None, 429, title="Locked out", message=message)
    saved = ui.signer.loads("oauth", ui.read_cookie(request, STATE_COOKIE)) or {}
    state, code = request.query_params.get("state"), request.query_params.get("code")
    if not csrf_ok(saved.get("s"), state) or not code:
        message = "This WeCom login was not started here; start again from the login page."
        return _refused(
            ui, request, tried, 403, "Refused", message, "WeCom login with a missing or foreign state"
        )
    try:
        user = user_of_code(ui, code)
    except OAuthError as exc:
        return _refused(
            ui,
            request,
            tried,
            401,
            "Login failed",
            f"WeCom login failed: {exc}.",
            f"WeCom login failed: {exc}",
        )
    if login_refusal(ui.app.deps.settings, ui.config, user, "wecom", "") is not None:
        message = f"{user} is not listed in access.yaml."
        return _refused(
            ui, request, tried, 403, "Not a xihe user", message, "WeCom user is not in access.yaml", user
        )
    ui.throttles.succeeded(tried)
    ui.app.deps.metrics.ui_logins.labels(outcome="ok").inc()
    response = ui.start_session(request, user, "", "wecom", "/ui/tasks")
    ui.drop_cookie(response, STATE_COOKIE)
    return response
