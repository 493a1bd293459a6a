"""Optional "log in with WeCom": OAuth2 `snsapi_base`, so the user id is the one WeCom verifies.

Flow: /ui/login/wecom redirects to WeCom's authorize page with a random `state` that is also kept in
a signed cookie; WeCom sends the browser back to /ui/login/wecom/callback?code=…&state=…; the state
must match the cookie (login CSRF), then `gettoken` + `auth/getuserinfo` turn the code into a userid.
Only users listed in access.yaml (or any user when `unknown_user_roles` grants something) get in.
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING
from urllib.parse import urlencode

import requests
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from xihe.agent.web.ui.auth import csrf_ok

if TYPE_CHECKING:
    from xihe.agent.web.ui.views import WebUI

STATE_COOKIE = "xihe_ui_oauth"


class OAuthError(Exception):
    """WeCom refused or the reply was not what the API documents."""


def _redirect_uri(ui: WebUI, request: Request) -> str:
    base = ui.config.wecom_oauth.redirect_base.rstrip("/") or str(request.base_url).rstrip("/")
    return f"{base}/ui/login/wecom/callback"


def start(ui: WebUI, request: Request) -> Response:
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
    ui._cookie(response, STATE_COOKIE, ui.signer.dumps("oauth", {"s": state}), 600)
    return response


def user_of_code(ui: WebUI, code: str) -> str:
    """gettoken + auth/getuserinfo: the verified WeCom userid of an OAuth code."""
    cfg = ui.config.wecom_oauth
    settings = ui.app.deps.settings
    base = cfg.api_base.rstrip("/")
    try:
        tok = requests.get(
            f"{base}/cgi-bin/gettoken",
            params={
                "corpid": settings.secret(cfg.corp_id_env),
                "corpsecret": settings.secret(cfg.secret_env),
            },
            timeout=10,
        ).json()
        if tok.get("errcode", 0) != 0 or not tok.get("access_token"):
            raise OAuthError(f"gettoken errcode {tok.get('errcode')}")
        info = requests.get(
            f"{base}/cgi-bin/auth/getuserinfo",
            params={"access_token": tok["access_token"], "code": code},
            timeout=10,
        ).json()
    except (requests.RequestException, ValueError) as exc:
        raise OAuthError(f"WeCom unreachable: {type(exc).__name__}") from None
    if info.get("errcode", 0) != 0:
        raise OAuthError(f"getuserinfo errcode {info.get('errcode')}")
    user = info.get("userid") or info.get("UserId")
    if not isinstance(user, str) or not user:
        raise OAuthError("not a member of the company (no userid)")
    return user


def callback(ui: WebUI, request: Request) -> Response:
    """Check the state, resolve the code, start a session."""
    cfg = ui.config.wecom_oauth
    if not cfg.enabled:
        return RedirectResponse("/ui/login", status_code=303)
    saved = ui.signer.loads("oauth", request.cookies.get(STATE_COOKIE)) or {}
    state, code = request.query_params.get("state"), request.query_params.get("code")
    if not csrf_ok(saved.get("s"), state) or not code:
        ui._audit("-", "login_failed", "WeCom login with a missing or foreign state", via="wecom")
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
        ui._audit("-", "login_failed", f"WeCom login failed: {exc}", via="wecom")
        return ui.render(
            request, "error.html", None, 401, title="Login failed", message=f"WeCom login failed: {exc}."
        )
    access = ui.app.deps.settings.access
    if user not in access.users and not access.unknown_user_roles:
        ui._audit(user, "login_failed", "WeCom user is not in access.yaml", via="wecom")
        return ui.render(
            request,
            "error.html",
            None,
            403,
            title="Not a xihe user",
            message=f"{user} is not listed in access.yaml.",
        )
    response = ui._start_session(request, user, "wecom", "wecom", "/ui/tasks")
    response.delete_cookie(STATE_COOKIE, path="/ui")
    return response
