"""Server-side sessions (issue 26, finding 2): logout revokes the cookie on every replica, idle and
absolute lifetimes, access.yaml and token changes end sessions, `xihe ui sessions` lists and ends."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from typing import Any

import pytest

from tests.ui.conftest import TOKENS, MakeUiBot, UiBot, csrf_of
from xihe.agent.clock import FakeClock, utc_now


def status(bot: UiBot, cookie: str, page: str = "/ui/tasks") -> int:
    """What a browser holding only this session cookie gets."""
    c = bot.client()
    c.cookies.set("xihe_ui", cookie)
    return c.get(page, follow_redirects=False).status_code


def test_a_cookie_copied_before_logout_is_dead_after_it_on_every_replica(ui_bot: MakeUiBot) -> None:
    bot = ui_bot()
    other = ui_bot(config_dir=bot.config_dir)  # a second replica over the same store and files
    c = bot.login("carol")
    stolen = c.cookies["xihe_ui"]
    assert status(other, stolen) == 200  # the session is in the store: any replica knows it
    page = c.get("/ui/tasks")
    assert c.post("/ui/logout", data={"csrf": csrf_of(page.text)}, follow_redirects=False).status_code == 303
    assert status(bot, stolen) == 303  # was 200 for the rest of its 12 hours
    assert status(other, stolen) == 303
    assert status(bot, stolen, "/ui/audit.json") == 303
    ended = bot.app.deps.audit.search(kind="web", outcome="logout")
    assert [r["actor"] for r in ended] == ["carol"]


def test_a_session_ends_after_its_idle_time_or_its_absolute_lifetime(ui_bot: MakeUiBot) -> None:
    bot = ui_bot()  # session_hours: 12, session_idle_minutes: 60 (the defaults)
    c = bot.login("dave")
    end = bot.clock() + timedelta(hours=12)
    while bot.clock() + timedelta(minutes=50) < end:  # in use all day: a page every 50 minutes
        bot.clock.advance(minutes=50)
        assert c.get("/ui/tasks", follow_redirects=False).status_code == 200, bot.clock()
    bot.clock.now = end
    assert c.get("/ui/tasks", follow_redirects=False).status_code == 303  # 12 h after login: over
    idle = bot.login("dave")
    bot.clock.advance(minutes=59)
    assert idle.get("/ui/tasks", follow_redirects=False).status_code == 200
    bot.clock.advance(minutes=60)  # an hour without a request
    assert idle.get("/ui/tasks", follow_redirects=False).status_code == 303
    bot.clock.advance(minutes=-60)  # an ended session stays ended, even if the clock came back
    assert idle.get("/ui/tasks", follow_redirects=False).status_code == 303
    reasons = sorted(str(r.end_reason) for r in _sessions(bot, with_ended=True))
    assert reasons == ["expired", "idle"]


def test_a_changed_token_ends_the_session(ui_bot: MakeUiBot, monkeypatch: pytest.MonkeyPatch) -> None:
    from xihe.agent.ops import feature as ops

    bot = ui_bot(files=("xihe.yaml", "access.yaml", "ops.yaml"))
    dave, carol = bot.login("dave"), bot.login("carol")
    assert dave.get("/ui/tasks").status_code == 200
    monkeypatch.setenv("XIHE_UI_TOKEN_DAVE", "rotated-token")  # checked on the next request
    assert dave.get("/ui/tasks", follow_redirects=False).status_code == 303
    ui = bot.config_dir / "ui.yaml"  # carol's sha256 changes in ui.yaml: ended at the reload
    ui.write_text(ui.read_text().replace(hashlib.sha256(TOKENS["carol"].encode()).hexdigest(), "a" * 64))
    assert ops.reload_config(bot.app) == "applied"
    rows = {r.user: r for r in _sessions(bot, with_ended=True)}
    assert rows["carol"].end_reason == "token changed" and rows["dave"].end_reason == "token changed"
    assert carol.get("/ui/tasks", follow_redirects=False).status_code == 303


def test_retention_prunes_ended_sessions_and_old_login_tries(ui_bot: MakeUiBot) -> None:
    from xihe.agent.ops import feature as ops

    bot = ui_bot()
    c = bot.login("dave")
    bot.login("carol")
    c.post("/ui/logout", data={"csrf": csrf_of(c.get("/ui/tasks").text)})
    guess = bot.client()
    assert (
        guess.post("/ui/login", data={"csrf": csrf_of(guess.get("/ui/login").text), "user": "x"}).status_code
        == 401
    )
    bot.clock.advance(days=6)
    assert ops.prune(bot.app)["ui_session"] == 0  # kept a week (ops.yaml retention.sessions_days)
    bot.clock.advance(days=2)
    counts = ops.prune(bot.app)
    assert counts["ui_session"] == 2 and counts["ui_login_attempt"] == 1  # dave's ended, carol's expired


def test_a_user_removed_from_access_yaml_loses_the_session_at_the_config_reload(ui_bot: MakeUiBot) -> None:
    bot = ui_bot(files=("xihe.yaml", "access.yaml", "ops.yaml"))
    carol, dave = bot.login("carol"), bot.login("dave")
    assert bot.remove_user("carol") == "applied"
    rows = {r.user: r for r in _sessions(bot, with_ended=True)}
    assert rows["carol"].end_reason == "not in access.yaml" and rows["dave"].ended_at is None
    audit = bot.app.deps.audit.search(kind="web", outcome="sessions_ended")
    assert audit[0]["detail"]["sessions"][0]["user"] == "carol"
    assert carol.get("/ui/tasks", follow_redirects=False).status_code == 303
    assert dave.get("/ui/tasks").status_code == 200


def _sessions(bot: UiBot, with_ended: bool = False) -> list[Any]:
    from xihe.agent.web.ui.sessions import SessionStore

    return SessionStore(bot.app.deps.engine).open(bot.clock(), with_ended=with_ended)


def test_xihe_ui_sessions_lists_and_ends_them(
    ui_bot: MakeUiBot, clock: FakeClock, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from xihe.agent.cli.main import main

    clock.now = utc_now()  # the CLI reads the real clock
    bot = ui_bot()
    monkeypatch.setenv("XIHE_DATABASE_URL", bot.db_url)
    dave1, dave2, carol = bot.login("dave"), bot.login("dave", address="10.0.0.7"), bot.login("carol")
    cli = ["--config", str(bot.config_dir), "ui", "sessions"]
    assert main(cli) == 0
    listing = capsys.readouterr().out
    assert listing.count(" dave ") == 2 and " carol " in listing and "10.0.0.7" in listing
    assert main([*cli, "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["user"] for r in rows} == {"dave", "carol"} and "sid_hash" not in rows[0]  # nor the id
    carol_id = next(r["id"] for r in rows if r["user"] == "carol")

    assert main([*cli, "end", str(carol_id)]) == 0
    assert capsys.readouterr().out.strip() == f"ended session {carol_id}"
    assert carol.get("/ui/tasks", follow_redirects=False).status_code == 303
    assert dave1.get("/ui/tasks").status_code == 200
    assert main([*cli, "end", str(carol_id)]) == 1  # already ended

    assert main([*cli, "end", "--user", "dave"]) == 0
    assert capsys.readouterr().out.strip().endswith("ended 2 session(s) of dave")
    assert dave1.get("/ui/tasks", follow_redirects=False).status_code == 303
    assert dave2.get("/ui/tasks", follow_redirects=False).status_code == 303
    assert main(cli) == 0 and "no open sessions" in capsys.readouterr().out
    assert main([*cli, "list", "--all"]) == 0
    assert capsys.readouterr().out.count("ended (ended by xihe ui sessions end)") == 3
    assert main([*cli, "end"]) == 2  # neither an id nor a user
    ended = bot.app.deps.audit.search(kind="web", outcome="sessions_ended")
    assert [r["actor"] for r in ended] == ["cli", "cli"]


def test_the_session_row_keeps_no_usable_secret(ui_bot: MakeUiBot) -> None:
    from xihe.agent.web.ui.auth import Signer

    bot = ui_bot()
    cookie = bot.login("dave").cookies["xihe_ui"]
    sid = Signer(b"test-secret-of-the-cookie-signer").loads("session", cookie)["s"]  # type: ignore[index]
    with bot.app.deps.engine.connect() as conn:
        dump = str(conn.exec_driver_sql("SELECT * FROM ui_session").all())
    assert sid not in dump and "dave" in dump
