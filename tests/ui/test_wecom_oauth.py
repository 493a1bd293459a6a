"""Optional WeCom login: state bound to a cookie, code → userid through gettoken + auth/getuserinfo."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlparse

import pytest

from tests.ui.conftest import MakeUiBot


class _WeComOAuthStub(BaseHTTPRequestHandler):
    codes: ClassVar[dict[str, str]] = {"code-for-carol": "carol", "code-for-mallory": "mallory"}

    def do_GET(self) -> None:
        url = urlparse(self.path)
        q = {k: v[0] for k, v in parse_qs(url.query).items()}
        if url.path == "/cgi-bin/gettoken":
            ok = q.get("corpid") == "corp-1" and q.get("corpsecret") == "app-secret"
            body: dict[str, Any] = (
                {"errcode": 0, "access_token": "tok", "expires_in": 7200} if ok else {"errcode": 40001}
            )
        elif url.path == "/cgi-bin/auth/getuserinfo" and q.get("access_token") == "tok":
            user = self.codes.get(q.get("code", ""))
            body = {"errcode": 0, "userid": user} if user else {"errcode": 40029, "errmsg": "invalid code"}
        else:
            body = {"errcode": 404}
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def wecom_api() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _WeComOAuthStub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture
def oauth_bot(ui_bot: MakeUiBot, wecom_api: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("XIHE_WECOM_CORP_ID", "corp-1")
    monkeypatch.setenv("XIHE_WECOM_APP_SECRET", "app-secret")
    oauth = {
        "enabled": True,
        "agent_id": 1000002,
        "api_base": wecom_api,
        "redirect_base": "https://xihe.example",
    }
    return ui_bot(ui={"wecom_oauth": oauth})


def _start(client: Any) -> str:
    r = client.get("/ui/login/wecom", follow_redirects=False)
    assert r.status_code == 303
    target = urlparse(r.headers["location"])
    q = {k: v[0] for k, v in parse_qs(target.query).items()}
    assert target.netloc == "open.weixin.qq.com" and target.fragment == "wechat_redirect"
    assert q["appid"] == "corp-1" and q["scope"] == "snsapi_base" and q["agentid"] == "1000002"
    assert q["redirect_uri"] == "https://xihe.example/ui/login/wecom/callback"
    return q["state"]


def test_wecom_login_gives_the_verified_user_a_session(oauth_bot: Any) -> None:
    c = oauth_bot.client()
    assert "Log in with WeCom" in c.get("/ui/login").text
    state = _start(c)
    r = c.get(f"/ui/login/wecom/callback?code=code-for-carol&state={state}", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/ui/tasks"
    page = c.get("/ui/tasks")
    assert '<span id="me">carol</span>' in page.text and "approver" in page.text
    login = [r for r in oauth_bot.app.deps.audit.search(kind="web") if r["outcome"] == "login"]
    assert login[0]["actor"] == "carol" and login[0]["detail"]["via"] == "wecom"


def test_wecom_login_refuses_foreign_state_bad_code_and_unknown_users(oauth_bot: Any) -> None:
    c = oauth_bot.client()
    state = _start(c)
    assert c.get("/ui/login/wecom/callback?code=code-for-carol&state=forged").status_code == 403
    other = oauth_bot.client()  # a callback link started in someone else's browser
    assert other.get(f"/ui/login/wecom/callback?code=code-for-carol&state={state}").status_code == 403
    assert c.get(f"/ui/login/wecom/callback?code=nope&state={state}").status_code == 401
    r = c.get(f"/ui/login/wecom/callback?code=code-for-mallory&state={state}")
    assert r.status_code == 403 and "not listed in access.yaml" in r.text
    assert c.get("/ui/tasks", follow_redirects=False).status_code == 303
    failed = [r for r in oauth_bot.app.deps.audit.search(kind="web") if r["outcome"] == "login_failed"]
    assert len(failed) == 4


def test_wecom_login_is_off_unless_enabled(ui_bot: MakeUiBot) -> None:
    c = ui_bot().client()
    assert "Log in with WeCom" not in c.get("/ui/login").text
    r = c.get("/ui/login/wecom", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/ui/login"
