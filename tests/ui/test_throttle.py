"""Login throttling (issue 26, finding 3): per user id and per client address, a sliding window then
a lockout with an expiry, counted in the store (every replica), and a bounded audit trail."""

from __future__ import annotations

from typing import Any

from starlette.testclient import TestClient

from tests.ui.conftest import TOKENS, MakeUiBot, UiBot, csrf_of


def try_login(c: TestClient, user: str, token: str) -> int:
    page = c.get("/ui/login")
    data = {"csrf": csrf_of(page.text), "user": user, "token": token}
    return c.post("/ui/login", data=data, follow_redirects=False).status_code


def web_rows(bot: UiBot, *outcomes: str) -> list[dict[str, Any]]:
    return [r for r in bot.app.deps.audit.search(kind="web", limit=1000) if r["outcome"] in outcomes]


def test_a_guessed_token_burst_locks_the_user_and_the_right_token_waits(ui_bot: MakeUiBot) -> None:
    bot = ui_bot()  # ui.yaml's defaults: 5 per user, 20 per address in 15 min, 15 min lockout
    attacker = bot.client("203.0.113.9")
    codes = [try_login(attacker, "dave", f"guess-{n}") for n in range(60)]
    assert codes[:5] == [401] * 5 and set(codes[5:]) == {429}  # 5 checked, the rest refused unchecked
    assert try_login(attacker, "dave", TOKENS["dave"]) == 429  # was 303: the 61st try got in
    assert try_login(bot.client("198.51.100.4"), "dave", TOKENS["dave"]) == 429  # the user id is locked
    assert try_login(bot.client("198.51.100.4"), "carol", TOKENS["carol"]) == 303  # others are not
    page = attacker.get("/ui/login")
    r = attacker.post("/ui/login", data={"csrf": csrf_of(page.text), "user": "dave", "token": "x"})
    assert "Too many failed logins for this user id; try again after" in r.text
    assert int(r.headers["retry-after"]) == 15 * 60
    rows = web_rows(bot, "login_failed", "login_locked")  # was one row per try
    assert [(r["outcome"], r["detail"]["count"]) for r in reversed(rows)] == [
        ("login_failed", 1),
        ("login_locked", 5),
    ]
    assert all(r["actor"] == "unverified:dave" for r in rows)
    bot.clock.advance(minutes=15)  # the lockout expires
    assert try_login(bot.client("198.51.100.4"), "dave", TOKENS["dave"]) == 303
    metrics = bot.client().get("/metrics").text
    assert 'xihe_ui_logins_total{outcome="locked"} 58.0' in metrics  # 55 + 3 refused by the lock
    assert 'xihe_ui_logins_total{outcome="failed"} 5.0' in metrics


def test_many_user_ids_from_one_address_lock_the_address(ui_bot: MakeUiBot) -> None:
    bot = ui_bot()  # ui.yaml's defaults: 5 per user, 20 per address in 15 min, 15 min lockout
    attacker = bot.client("203.0.113.9")
    codes = [try_login(attacker, f"user{n}", "x") for n in range(25)]
    assert codes[:20] == [401] * 20 and set(codes[20:]) == {429}
    assert try_login(attacker, "carol", TOKENS["carol"]) == 429  # the address is locked for everyone
    assert try_login(bot.client("198.51.100.4"), "carol", TOKENS["carol"]) == 303
    (lock,) = web_rows(bot, "login_locked")
    assert lock["detail"]["scope"] == "client" and lock["detail"]["client"] == "203.0.113.9"
    assert lock["detail"]["count"] == 20 and len(lock["detail"]["users_tried"]) == 5
    assert len(web_rows(bot, "login_failed")) == 1


def test_failures_count_on_every_replica(ui_bot: MakeUiBot) -> None:
    bot = ui_bot()  # ui.yaml's defaults: 5 per user, 20 per address in 15 min, 15 min lockout
    other = ui_bot(config_dir=bot.config_dir)  # the same store and files: a second replica
    for n in range(5):
        assert try_login((bot if n % 2 else other).client("203.0.113.9"), "dave", "wrong") == 401
    assert try_login(bot.client("203.0.113.9"), "dave", TOKENS["dave"]) == 429
    assert try_login(other.client("203.0.113.9"), "dave", TOKENS["dave"]) == 429


def test_the_window_slides_and_a_success_clears_the_users_failures(ui_bot: MakeUiBot) -> None:
    bot = ui_bot()  # ui.yaml's defaults: 5 per user, 20 per address in 15 min, 15 min lockout
    c = bot.client()
    for _ in range(4):
        assert try_login(c, "dave", "wrong") == 401
    assert try_login(c, "dave", TOKENS["dave"]) == 303  # the 5th try is right: no lock
    for _ in range(4):
        assert try_login(c, "dave", "wrong") == 401  # counting starts again
    bot.clock.advance(minutes=16)  # those four slid out of the window
    for _ in range(4):
        assert try_login(c, "dave", "wrong") == 401
    assert try_login(c, "dave", TOKENS["dave"]) == 303
    assert not web_rows(bot, "login_locked")


def test_the_actor_of_a_failed_login_is_bounded_and_marked_unverified(ui_bot: MakeUiBot) -> None:
    bot = ui_bot()
    claimed = "dave\u202e\x00\n" + "A" * 5000
    assert try_login(bot.client(), claimed, "x") == 401
    (row,) = web_rows(bot, "login_failed")
    assert row["actor"] == "unverified:dave" + "A" * 60
    with bot.app.deps.engine.connect() as conn:
        keys = conn.exec_driver_sql("SELECT user_key FROM ui_login_attempt").scalars().all()
    assert keys == ["dave" + "a" * 116]  # case-folded and bounded, as it is counted
