"""Cookies, login CSRF and what anonymous callers learn (issue 26, findings 5, 6, 8, 9 and HSTS):
Secure `__Host-` cookies unless serve listens on loopback, a signed pre-login token, cross-site POSTs
refused, redirect_base required for the WeCom login, /readyz without paths or secret names."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import yaml

from tests.ui.conftest import TOKENS, MakeUiBot, csrf_of, ui_yaml


def set_cookies(response: object) -> list[str]:
    return [v for k, v in response.headers.multi_items() if k == "set-cookie"]  # type: ignore[attr-defined]


def test_off_loopback_the_cookies_are_secure_host_prefixed_and_work(ui_bot: MakeUiBot) -> None:
    bot = ui_bot(listen="0.0.0.0")  # what deploy/ runs: `xihe serve --host 0.0.0.0` behind TLS
    c = bot.client()
    page = c.get("/ui/login")
    (pre,) = set_cookies(page)
    assert pre.startswith("__Host-xihe_ui_pre=") and "Secure" in pre and "Path=/;" in pre
    data = {"csrf": csrf_of(page.text), "user": "dave", "token": TOKENS["dave"]}
    r = c.post("/ui/login", data=data, follow_redirects=False)
    session = next(v for v in set_cookies(r) if v.startswith("__Host-xihe_ui="))  # was xihe_ui, no Secure
    assert "Secure" in session and "HttpOnly" in session and "Path=/;" in session and "Domain" not in session
    assert c.get("/ui/tasks").status_code == 200  # the browser sends it back over HTTPS
    assert "strict-transport-security" not in c.get("/ui/tasks").headers  # off unless configured


def test_on_loopback_the_cookies_are_plain_and_an_explicit_false_is_warned_about(
    ui_bot: MakeUiBot, caplog: pytest.LogCaptureFixture
) -> None:
    local = ui_bot()  # 127.0.0.1, the serve default: plain HTTP must work
    session = next(v for v in set_cookies(local.client().get("/ui/login")) if "xihe_ui_pre" in v)
    assert session.startswith("xihe_ui_pre=") and "Secure" not in session and "Path=/ui" in session
    exposed = ui_bot(listen="0.0.0.0", ui={"cookie_secure": False})
    with caplog.at_level(logging.WARNING), exposed.client() as c:  # the lifespan runs start-up
        assert "Secure" not in " ".join(set_cookies(c.get("/ui/login")))
    assert "cookie_secure: false while xihe serve listens on 0.0.0.0" in caplog.text


def test_hsts_when_configured(ui_bot: MakeUiBot) -> None:
    bot = ui_bot(listen="0.0.0.0", ui={"hsts_seconds": 31536000})
    c = bot.login("dave")
    assert c.get("/ui/tasks").headers["strict-transport-security"] == "max-age=31536000"
    assert c.get("/ui/login").headers["strict-transport-security"] == "max-age=31536000"


def test_config_check_says_why_the_cookie_is_or_is_not_secure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.conftest import REPO, write_config
    from xihe.agent.cli.main import main

    cfg = write_config(tmp_path / "cfg")
    (cfg / "ui.yaml").write_text((REPO / "config" / "ui.yaml").read_text())
    assert main(["config", "check", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert "NOTE ui.yaml: cookie_secure: auto: the cookies are Secure" in out and "loopback" in out
    (cfg / "ui.yaml").write_text(yaml.safe_dump({**ui_yaml(), "cookie_secure": False, "hsts_seconds": 60}))
    assert main(["config", "check", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert "cookie_secure: false: the session cookie also travels over plain HTTP" in out
    assert "browsers ignore HSTS over plain HTTP" in out


def test_a_self_made_pre_login_cookie_is_refused(ui_bot: MakeUiBot) -> None:
    bot = ui_bot()
    c = bot.client()
    c.cookies.set("xihe_ui_pre", "chosen-by-a-sibling-host", path="/ui")  # was accepted: not signed
    r = c.post("/ui/login", data={"csrf": "chosen-by-a-sibling-host", "user": "dave", "token": TOKENS["dave"]},
               follow_redirects=False)  # fmt: skip
    assert r.status_code == 403 and "The form expired" in r.text
    assert c.get("/ui/tasks", follow_redirects=False).status_code == 303
    stale = bot.client()
    page = stale.get("/ui/login")
    bot.clock.advance(minutes=61)  # a signed token expires with its form
    data = {"csrf": csrf_of(page.text), "user": "dave", "token": TOKENS["dave"]}
    assert stale.post("/ui/login", data=data, follow_redirects=False).status_code == 403


CROSS_SITE = [
    {"Sec-Fetch-Site": "same-site"},  # a sibling host
    {"Sec-Fetch-Site": "cross-site"},
    {"Origin": "https://evil.example"},  # a browser without Sec-Fetch-*
    {"Origin": "null"},
]


@pytest.mark.parametrize("headers", CROSS_SITE)
def test_a_post_from_another_site_is_refused_even_with_a_valid_token(
    ui_bot: MakeUiBot, headers: dict[str, str]
) -> None:
    bot = ui_bot()
    c = bot.client()
    page = c.get("/ui/login")
    data = {"csrf": csrf_of(page.text), "user": "dave", "token": TOKENS["dave"]}
    assert c.post("/ui/login", data=data, headers=headers, follow_redirects=False).status_code == 403
    same = {"Sec-Fetch-Site": "same-origin", "Origin": "http://testserver"}
    data["csrf"] = csrf_of(c.get("/ui/login").text)  # the refusal handed out a new form
    assert c.post("/ui/login", data=data, headers=same, follow_redirects=False).status_code == 303
    action = bot.seed_prod_write(user="bob")
    page = c.get("/ui/pending")
    r = c.post(f"/ui/pending/{action}/approve", data={"csrf": csrf_of(page.text)}, headers=headers)
    assert r.status_code == 403 and "sent from another site" in r.text
    assert bot.app.deps.pending.get(action).approved_by is None  # type: ignore[union-attr]


def test_anonymous_readyz_names_no_paths_admins_see_the_reason(ui_bot: MakeUiBot) -> None:
    from xihe.agent.ops import feature as ops

    bot = ui_bot(files=("xihe.yaml", "access.yaml", "ops.yaml"))
    ops_yaml = bot.config_dir / "ops.yaml"
    ops_yaml.write_text(ops_yaml.read_text() + "\nretension: {}\n")
    assert ops.reload_config(bot.app) == "refused"
    anonymous = bot.client().get("/readyz")
    assert anonymous.status_code == 503
    assert str(bot.config_dir) not in anonymous.text and "ops.yaml" not in anonymous.text  # was both
    assert anonymous.json()["problems"] == ["config reload refused"]
    admin = bot.login("dave").get("/ui/readyz")
    assert admin.status_code == 503 and "ops.yaml:" in admin.text and "retension" in admin.text
    assert str(bot.config_dir) not in admin.text  # no absolute server path, even for admins
    assert bot.login("carol").get("/ui/readyz").status_code == 403  # an approver, not an admin
    refused = bot.app.deps.audit.search(kind="config", outcome="reload_refused")
    assert refused[0]["reason"].startswith("ops.yaml:")  # what /ui/audit shows
