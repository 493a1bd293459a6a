"""Optional WeCom login: state bound to a cookie, code → userid through gettoken + auth/getuserinfo."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from tests.ui.conftest import MakeUiBot
from xihe.integrations.wecom.fake import FakeWeCom


@pytest.fixture
def wecom_api() -> Iterator[FakeWeCom]:
    with FakeWeCom() as fake:
        fake.add_app("corp-1", "app-secret", 1000002)
        yield fake


@pytest.fixture
def oauth_bot(ui_bot: MakeUiBot, wecom_api: FakeWeCom, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("XIHE_WECOM_CORP_ID", "corp-1")
    monkeypatch.setenv("XIHE_WECOM_APP_SECRET", "app-secret")
    oauth = {
        "enabled": True,
        "agent_id": 1000002,
        "api_base": wecom_api.url,
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


def test_wecom_login_gives_the_verified_user_a_session(oauth_bot: Any, wecom_api: FakeWeCom) -> None:
    c = oauth_bot.client()
    assert "Log in with WeCom" in c.get("/ui/login").text
    state = _start(c)
    code = wecom_api.oauth_code("carol")
    r = c.get(f"/ui/login/wecom/callback?code={code}&state={state}", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/ui/tasks"
    page = c.get("/ui/tasks")
    assert '<span id="me">carol</span>' in page.text and "approver" in page.text
    login = [r for r in oauth_bot.app.deps.audit.search(kind="web") if r["outcome"] == "login"]
    assert login[0]["actor"] == "carol" and login[0]["detail"]["via"] == "wecom"
    assert wecom_api.gettoken_calls == 1  # the token came from the WeCom app client


def test_wecom_login_refuses_foreign_state_bad_code_and_unknown_users(
    oauth_bot: Any, wecom_api: FakeWeCom
) -> None:
    c = oauth_bot.client()
    state = _start(c)
    carol = wecom_api.oauth_code("carol")
    assert c.get(f"/ui/login/wecom/callback?code={carol}&state=forged").status_code == 403
    other = oauth_bot.client()  # a callback link started in someone else's browser
    assert other.get(f"/ui/login/wecom/callback?code={carol}&state={state}").status_code == 403
    assert c.get(f"/ui/login/wecom/callback?code=nope&state={state}").status_code == 401
    mallory = wecom_api.oauth_code("mallory")
    r = c.get(f"/ui/login/wecom/callback?code={mallory}&state={state}")
    assert r.status_code == 403 and "not listed in access.yaml" in r.text
    assert c.get("/ui/tasks", follow_redirects=False).status_code == 303
    failed = [r for r in oauth_bot.app.deps.audit.search(kind="web") if r["outcome"] == "login_failed"]
    # anonymous failures from one address: the first of the burst is audited, the rest counted;
    # the user id WeCom verified is audited under that id
    assert sorted(r["actor"] for r in failed) == ["mallory", "unverified:-"]


def test_wecom_login_code_works_once_and_only_for_members(oauth_bot: Any, wecom_api: FakeWeCom) -> None:
    c = oauth_bot.client()
    state = _start(c)
    code = wecom_api.oauth_code("carol")
    assert (
        c.get(f"/ui/login/wecom/callback?code={code}&state={state}", follow_redirects=False).status_code
        == 303
    )
    thief = oauth_bot.client()
    state2 = _start(thief)
    replay = thief.get(f"/ui/login/wecom/callback?code={code}&state={state2}")
    assert replay.status_code == 401 and "40029" in replay.text
    outsider = wecom_api.oauth_code("guest", member=False)
    r = thief.get(f"/ui/login/wecom/callback?code={outsider}&state={state2}")
    assert r.status_code == 401 and "not a member" in r.text
    failures = [
        r["reason"] for r in oauth_bot.app.deps.audit.search(kind="web") if r["outcome"] == "login_failed"
    ]
    assert len(failures) == 1 and "40029" in failures[0]  # the first of the burst; the rest are counted
    assert all("app-secret" not in f for f in failures)


def test_wecom_login_is_off_unless_enabled(ui_bot: MakeUiBot) -> None:
    c = ui_bot().client()
    assert "Log in with WeCom" not in c.get("/ui/login").text
    r = c.get("/ui/login/wecom", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/ui/login"


def test_a_wecom_session_ends_when_its_user_leaves_access_yaml(oauth_bot: Any, wecom_api: FakeWeCom) -> None:
    c = oauth_bot.client()
    state = _start(c)
    c.get(f"/ui/login/wecom/callback?code={wecom_api.oauth_code('bob')}&state={state}")
    assert '<span id="me">bob</span>' in c.get("/ui/tasks").text  # a WeCom session, no token involved
    assert oauth_bot.remove_user("bob") == "applied"
    assert c.get("/ui/tasks", follow_redirects=False).status_code == 303  # was 200 for its 12 hours
    ended = oauth_bot.app.deps.audit.search(kind="web", outcome="sessions_ended")
    assert ended[0]["detail"]["sessions"][0] == {"id": 1, "user": "bob", "why": "not in access.yaml"}


def test_redirect_uri_is_the_configured_base_never_the_host_header(
    oauth_bot: Any, wecom_api: FakeWeCom
) -> None:
    from xihe.agent.errors import ConfigErrors
    from xihe.config.ui import UiConfig
    from xihe.config.yamlmodel import load_model

    c = oauth_bot.client()
    r = c.get("/ui/login/wecom", headers={"Host": "evil.example"}, follow_redirects=False)
    q = parse_qs(urlparse(r.headers["location"]).query)
    assert q["redirect_uri"] == ["https://xihe.example/ui/login/wecom/callback"]
    # without redirect_base the Host header was used; now ui.yaml is refused at load
    with pytest.raises(
        ConfigErrors, match=r"ui\.yaml:1: wecom_oauth: .*redirect_base is required when enabled"
    ):
        load_model("wecom_oauth:\n  enabled: true\n", "ui.yaml", UiConfig)
    with pytest.raises(ConfigErrors, match="redirect_base must be an http"):
        load_model("wecom_oauth:\n  redirect_base: javascript:alert(1)\n", "ui.yaml", UiConfig)
    assert not load_model("wecom_oauth:\n  enabled: false\n", "ui.yaml", UiConfig).wecom_oauth.redirect_base
