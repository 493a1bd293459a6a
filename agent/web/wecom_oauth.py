"""Optional "log in with WeCom": OAuth2 `snsapi_base`, so the user id is the one WeCom verifies.

Flow: /ui/login/wecom redirects to WeCom's authorize page with a random `state` that is also kept in
a signed cookie; WeCom sends the browser back to /ui/login/wecom/callback?code=…&state=…; the state
must match the cookie (login CSRF), then the WeCom app client (`gettoken` + `auth/getuserinfo`) turns
the code into a userid.
Only users listed in access.yaml (or any user when `unknown_user_roles` grants something) get in.
"""

from __future__ import annotations

import secrets
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from xihe.agent.errors import WeComError
from xihe.agent.web.ui.auth import csrf_ok
from xihe.agent.web.ui.page import Pages
from xihe.integrations.wecom.app_client import AppClient

STATE_COOKIE = "xihe_ui_oauth"


class OAuthError(Exception):
    """WeCom refused or the reply was not what the API documents."""


def _redirect_uri(ui: Pages, request: Request) -> str:
    base = ui.config.wecom_oauth.redirect_base.rstrip("/") or str(request.base_url).rstrip("/")
    return f"{base}/ui/login/wecom/callback"


def start(ui: Pages, request: Request) -> Response:
    """Send the browser to WeCom's authorize page."""
    cfg = ui.config.wecom_oauth
    corp_id = ui.app.deps.settings.secret(cfg.corp_id_env)
    if not cfg.enabled or not corp_id:
        return RedirectResponse("/ui/login", status_code=303)
    state = secrets.token_urlsafe(16)
    query = {
        "appid": corp_id,
        "redirect_uri": _redirect_uri(ui, request),
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


def callback(ui: Pages, request: Request) -> Response:
    """Check the state, resolve the code, start a session."""
    cfg = ui.config.wecom_oauth
    if not cfg.enabled:
        return RedirectResponse("/ui/login", status_code=303)
    saved = ui.signer.loads("oauth", request.cookies.get(STATE_COOKIE)) or {}
    state, code = request.query_params.get("state"), request.query_params.get("code")
    if not csrf_ok(saved.get("s"), state) or not code:
        ui.audit("-", "login_failed", "WeCom login with a missing or foreign state", via="wecom")
        return ui.render(
            request,
            "error.html",
            None,
            403,
            title="Refused",
            message="This WeCom login was not started here; start again from the login page.",
        )
    try:
        user = user_of_code(ui, code)
    except OAuthError as exc:
        ui.audit("-", "login_failed", f"WeCom login failed: {exc}", via="wecom")
        return ui.render(
            request, "error.html", None, 401, title="Login failed", message=f"WeCom login failed: {exc}."
        )
    access = ui.app.deps.settings.access
    if user not in access.users and not access.unknown_user_roles:
        ui.audit(user, "login_failed", "WeCom user is not in access.yaml", via="wecom")
        return ui.render(
            request,
            "error.html",
            None,
            403,
            title="Not a xihe user",
            message=f"{user} is not listed in access.yaml.",
        )
    response = ui.start_session(request, user, "wecom", "wecom", "/ui/tasks")
    response.delete_cookie(STATE_COOKIE, path="/ui")
    return response
