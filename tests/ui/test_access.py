"""Who may see and do what on /ui: login, session, CSRF, approver rules, escaping, ownership."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from tests.ui.conftest import TOKENS, MakeUiBot, UiBot, csrf_of, ui_yaml
from xihe.integrations.fakes.llm_server import say

PAGES = [
    "/ui/tasks",
    "/ui/tasks/1",
    "/ui/tasks/1.json",
    "/ui/audit",
    "/ui/audit.json",
    "/ui/alerts",
    "/ui/pending",
    "/ui/artifacts/abc",
]


def effects(tmp_path: Path) -> list[dict]:
    path = tmp_path / "effects.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def web_audit(bot: UiBot, outcome: str) -> list[dict]:
    return [r for r in bot.app.deps.audit.search(limit=500) if r["outcome"] == outcome]


def test_without_a_session_every_page_redirects_to_login(ui_bot: MakeUiBot) -> None:
    bot = ui_bot()
    bot.seed_done()
    c = bot.client()
    for page in PAGES:
        r = c.get(page, follow_redirects=False)
        assert r.status_code == 303, page
        assert r.headers["location"].startswith("/ui/login?next=")
    r = c.post("/ui/pending/1/approve", data={"csrf": "x"}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/ui/login")
    login = c.get("/ui/tasks")  # following the redirect lands on the login form
    assert login.status_code == 200 and 'name="token"' in login.text


def test_a_forged_or_foreign_cookie_is_no_session(ui_bot: MakeUiBot) -> None:
    from xihe.agent.web.ui.auth import Signer

    bot = ui_bot()
    signer = Signer(b"test-secret-of-the-cookie-signer")  # the secret the fixture sets
    real = bot.login("dave").cookies["xihe_ui"]
    sid = signer.loads("session", real)["s"]  # type: ignore[index]

    def status(cookie: str) -> int:
        c = bot.client()
        c.cookies.set("xihe_ui", cookie)
        return c.get("/ui/tasks", follow_redirects=False).status_code

    assert status(real) == 200  # control: the cookie of a stored session works
    assert status(signer.dumps("session", {"s": sid})) == 200  # the same id, signed again
    _body, mac = real.split(".")
    forged = signer.dumps("session", {"s": sid + "x"})
    assert status(f"{forged.split('.')[0]}.{mac}") == 303  # payload changed, old signature
    assert status(Signer(b"another-secret").dumps("session", {"s": sid})) == 303
    assert status(signer.dumps("flash", {"s": sid})) == 303  # signed, but for another purpose
    assert status(signer.dumps("session", {"s": "made-up-session-id"})) == 303  # signed, never stored
    assert status(signer.dumps("session", {"u": "dave", "x": 2**40})) == 303  # the old stateless form
    assert status("garbage") == 303


def test_login_with_a_token_and_logout(ui_bot: MakeUiBot) -> None:
    bot = ui_bot()
    c = bot.login("carol")  # token given as sha256 in ui.yaml
    page = c.get("/ui/tasks")
    assert page.status_code == 200 and '<span id="me">carol</span>' in page.text
    assert "approver" in page.text
    assert bot.login("dave").get("/ui/tasks").status_code == 200  # a second user, a second session
    r = c.post("/ui/logout", data={"csrf": csrf_of(page.text)}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/ui/login"
    assert c.get("/ui/tasks", follow_redirects=False).status_code == 303
    logins = [r["actor"] for r in web_audit(bot, "login")]
    assert sorted(logins) == ["carol", "dave"]
    assert [r["actor"] for r in web_audit(bot, "logout")] == ["carol"]


def test_session_cookie_flags(ui_bot: MakeUiBot) -> None:
    bot = ui_bot()
    c = bot.client()
    page = c.get("/ui/login")
    r = c.post(
        "/ui/login",
        data={"csrf": csrf_of(page.text), "user": "dave", "token": TOKENS["dave"]},
        follow_redirects=False,
    )
    header = next(v for k, v in r.headers.multi_items() if k == "set-cookie" and v.startswith("xihe_ui="))
    assert "HttpOnly" in header and "SameSite=lax" in header and "Path=/ui" in header


@pytest.mark.parametrize(
    "user,token",
    [("dave", "wrong"), ("mallory", "anything"), ("alice", TOKENS["dave"]), ("", ""), ("dave", "")],
)
def test_wrong_token_or_unknown_user_is_refused_and_audited(ui_bot: MakeUiBot, user: str, token: str) -> None:
    bot = ui_bot()
    c = bot.client()
    page = c.get("/ui/login")
    r = c.post(
        "/ui/login", data={"csrf": csrf_of(page.text), "user": user, "token": token}, follow_redirects=False
    )
    assert r.status_code == 401
    assert "Unknown user or wrong token" in r.text
    assert c.get("/ui/tasks", follow_redirects=False).status_code == 303
    assert len(web_audit(bot, "login_failed")) == 1


def test_login_form_without_its_csrf_token_is_refused(ui_bot: MakeUiBot) -> None:
    bot = ui_bot()
    c = bot.client()
    c.get("/ui/login")
    r = c.post("/ui/login", data={"user": "dave", "token": TOKENS["dave"]}, follow_redirects=False)
    assert r.status_code == 403
    assert c.get("/ui/tasks", follow_redirects=False).status_code == 303


def test_forged_form_without_the_csrf_token_is_refused(ui_bot: MakeUiBot, tmp_path: Path) -> None:
    bot = ui_bot()
    action = bot.seed_prod_write()
    c = bot.login("dave")
    for data in ({}, {"csrf": ""}, {"csrf": "guessed-token"}):
        r = c.post(f"/ui/pending/{action}/approve", data=data, follow_redirects=False)
        assert r.status_code == 403, data
        assert "CSRF" in r.text
    r = c.post(f"/ui/pending/{action}/reject", data={}, follow_redirects=False)
    assert r.status_code == 403
    other = bot.login("carol")  # another session's token is not this session's
    carol_csrf = csrf_of(other.get("/ui/pending").text)
    assert c.post(f"/ui/pending/{action}/approve", data={"csrf": carol_csrf}).status_code == 403
    pending = bot.app.deps.pending.get(action)
    assert pending is not None and pending.approved_by is None and pending.status == "confirmed"
    assert effects(tmp_path) == []
    assert len(web_audit(bot, "csrf_refused")) == 5


def test_non_approver_cannot_approve_or_reject(ui_bot: MakeUiBot, tmp_path: Path) -> None:
    bot = ui_bot()
    action = bot.seed_prod_write(user="bob")
    c = bot.login("alice")  # developer: no approver role (and the action is not hers)
    page = c.get("/ui/pending")
    assert f'id="pending-{action}"' not in page.text  # not even shown: not hers, she is not privileged
    csrf = csrf_of(page.text)
    r = c.post(f"/ui/pending/{action}/approve", data={"csrf": csrf}, follow_redirects=False)
    assert r.status_code == 403
    assert "has no approver role" in r.text
    r = c.post(f"/ui/pending/{action}/reject", data={"csrf": csrf}, follow_redirects=False)
    assert r.status_code == 403
    own = bot.login("bob")  # the requester sees it, read-only, and is told to confirm in chat
    page = own.get("/ui/pending")
    assert f'id="pending-{action}"' in page.text
    card = page.text.split(f'id="pending-{action}"')[1].split("</section>")[0]
    assert f'action="/ui/pending/{action}/approve"' not in card
    assert f"<code>/confirm {action}</code>" not in card  # already confirmed: nothing for bob to do
    r = own.post(f"/ui/pending/{action}/approve", data={"csrf": csrf_of(page.text)}, follow_redirects=False)
    assert r.status_code == 403 and "requester cannot approve their own" in r.text
    pending = bot.app.deps.pending.get(action)
    assert pending is not None and pending.approved_by is None and pending.status == "confirmed"
    assert effects(tmp_path) == []
    refused = web_audit(bot, "approve_refused")
    assert sorted(r["actor"] for r in refused) == ["alice", "bob"]
    assert refused[0]["detail"]["channel"] == "web"


def test_approver_approves_from_the_page_the_task_runs_and_the_requester_is_told(
    ui_bot: MakeUiBot, tmp_path: Path
) -> None:
    bot = ui_bot()
    action = bot.seed_prod_write(user="bob", note="rotate keys")
    c = bot.login("carol")
    page = c.get("/ui/pending")
    assert f'action="/ui/pending/{action}/approve"' in page.text
    r = c.post(f"/ui/pending/{action}/approve", data={"csrf": csrf_of(page.text)})
    assert (
        r.status_code == 200
        and "Approved action" in r.text
        and "it ran: Wrote the note rotate keys." in r.text
    )
    assert [e["note"] for e in effects(tmp_path)] == ["rotate keys"]
    assert bot.notes[-1] == ("wecom:bob", "Wrote the note rotate keys.")
    task_id = bot.app.deps.pending.get(action).task_id  # type: ignore[union-attr]
    assert bot.app.deps.tasks.get(task_id).status == "done"
    approved = web_audit(bot, "approved")
    assert approved[0]["actor"] == "carol" and approved[0]["detail"]["channel"] == "web"
    again = c.post(f"/ui/pending/{action}/approve", data={"csrf": csrf_of(page.text)})
    assert "cannot be approved" in again.text
    assert len(effects(tmp_path)) == 1
    bot.llm.assert_consumed()


def test_approval_before_the_requesters_confirm_waits_for_chat(ui_bot: MakeUiBot, tmp_path: Path) -> None:
    bot = ui_bot()
    action = bot.seed_prod_write(user="bob", note="n1", confirm=False)
    c = bot.login("dave")
    page = c.get("/ui/pending")
    r = c.post(f"/ui/pending/{action}/approve", data={"csrf": csrf_of(page.text)})
    assert "runs once bob confirms in chat" in r.text
    assert effects(tmp_path) == []
    assert bot.notes[-1] == (
        "wecom:bob",
        f"dave approved action {action}; it runs after your /confirm {action}.",
    )
    assert bot.ask("bob", f"/confirm {action}") == "Wrote the note n1."
    assert len(effects(tmp_path)) == 1


def test_reject_from_the_page_runs_nothing(ui_bot: MakeUiBot, tmp_path: Path) -> None:
    bot = ui_bot()
    action = bot.seed_prod_write(user="bob", note="n2")
    bot.llm.add(say("Nothing was done."))
    c = bot.login("carol")
    page = c.get("/ui/pending")
    r = c.post(f"/ui/pending/{action}/reject", data={"csrf": csrf_of(page.text)})
    assert "Rejected action" in r.text
    assert effects(tmp_path) == []
    assert bot.app.deps.pending.get(action).status == "rejected"  # type: ignore[union-attr]
    assert bot.notes[-1][0] == "wecom:bob" and "carol rejected action" in bot.notes[-1][1]
    rejected = [r for r in web_audit(bot, "rejected") if r["kind"] == "confirm"]
    assert rejected[0]["actor"] == "carol" and rejected[0]["detail"]["channel"] == "web"


def test_expired_action_cannot_be_approved(ui_bot: MakeUiBot, tmp_path: Path) -> None:
    bot = ui_bot()
    action = bot.seed_prod_write(user="bob")
    bot.clock.advance(minutes=16)
    c = bot.login("dave")
    page = c.get("/ui/pending")
    assert "(expired)" in page.text and f'action="/ui/pending/{action}/approve"' not in page.text
    r = c.post(f"/ui/pending/{action}/approve", data={"csrf": csrf_of(page.text)})
    assert "is expired; it cannot be approved" in r.text
    assert effects(tmp_path) == []


HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def test_hostile_task_text_is_escaped(ui_bot: MakeUiBot) -> None:
    bot = ui_bot()
    task_id = bot.seed_failed(user="alice", reason=HOSTILE)
    bot.llm.add(say(HOSTILE))
    bot.ask("alice", HOSTILE)
    c = bot.login("dave")
    pages = [
        c.get("/ui/tasks"),
        c.get(f"/ui/tasks/{task_id}"),
        c.get(f"/ui/tasks/{task_id + 1}"),
        c.get("/ui/audit"),
    ]
    for page in pages:
        assert page.status_code == 200
        assert "<script>alert" not in page.text and "<img src=x" not in page.text
    assert "&lt;script&gt;alert(" in pages[1].text  # the failed step's error, shown as text
    assert "&lt;img src=x onerror=alert(1)&gt;" in pages[2].text
    csp = pages[0].headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src" not in csp  # no scripts at all


def test_read_only_users_see_only_their_own_tasks_and_audit(ui_bot: MakeUiBot) -> None:
    bot = ui_bot()
    mine = bot.seed_done(user="alice", text="mine")
    theirs = bot.seed_done(user="bob", text="theirs")
    c = bot.login("alice")
    listing = c.get("/ui/tasks?user=bob").text  # the user filter is ignored for her
    assert f'href="/ui/tasks/{mine}"' in listing and f'href="/ui/tasks/{theirs}"' not in listing
    assert c.get(f"/ui/tasks/{theirs}").status_code == 403
    assert c.get(f"/ui/tasks/{theirs}.json").status_code == 403
    rows = json.loads(c.get("/ui/audit.json?user=bob").text)
    assert rows and {r["actor"] for r in rows} == {"alice"}
    assert "read-only" in listing
    admin = bot.login("dave").get("/ui/tasks").text
    assert f'href="/ui/tasks/{mine}"' in admin and f'href="/ui/tasks/{theirs}"' in admin


def test_artifacts_are_viewable_by_their_owner_and_approvers_only(ui_bot: MakeUiBot) -> None:
    from xihe.integrations.fakes.llm_server import call, say

    bot = ui_bot([call("big_output", size=9000), say("Here is the long output.")])
    bot.ask("alice", "give me a long output")
    steps = bot.app.deps.tasks.steps(1)
    ref = next(s.output_ref for s in steps if s.output_ref)
    page = bot.login("alice").get("/ui/tasks/1")
    assert f'href="/ui/artifacts/{ref}"' in page.text
    own = bot.login("alice").get(f"/ui/artifacts/{ref}")
    assert own.status_code == 200 and "line 000000 of the long output" in own.text
    raw = bot.login("carol").get(f"/ui/artifacts/{ref}?raw=1")
    assert raw.status_code == 200 and raw.headers["content-type"].startswith("text/plain")
    assert bot.login("bob").get(f"/ui/artifacts/{ref}").status_code == 403


def test_ui_yaml_validation() -> None:
    from xihe.agent.errors import ConfigErrors
    from xihe.config.ui import UiConfig
    from xihe.config.yamlmodel import load_model

    good = yaml.safe_dump(ui_yaml())
    assert load_model(good, "ui.yaml", UiConfig).users["carol"].token_sha256
    bad = "users:\n  eve:\n    token_env: X\n    token_sha256: " + hashlib.sha256(b"x").hexdigest() + "\n"
    with pytest.raises(ConfigErrors, match="exactly one of token_env or token_sha256"):
        load_model(bad, "ui.yaml", UiConfig)
    with pytest.raises(ConfigErrors, match=r"ui\.yaml:1: sesion_hours"):
        load_model("sesion_hours: 3\n", "ui.yaml", UiConfig)


def test_shipped_ui_yaml_is_valid() -> None:
    from xihe.config.ui import UiConfig
    from xihe.config.yamlmodel import load_model

    path = Path(__file__).resolve().parents[2] / "config" / "ui.yaml"
    cfg = load_model(path.read_text(), str(path), UiConfig)
    assert cfg.session_secret_env == "XIHE_UI_SECRET" and not cfg.wecom_oauth.enabled
