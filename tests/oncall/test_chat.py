"""`/oncall` in a whole bot: who is on call, take and swap stored (SQLite and PostgreSQL), audited,
validated with errors that name the bad argument, and expiring by themselves."""

from __future__ import annotations

from tests.oncall.conftest import OnCallApp
from xihe.agent.app import App
from xihe.agent.clock import FakeClock
from xihe.agent.inbound import Inbound
from xihe.config.workflows import Workflow

# The test clock starts on Wednesday 2026-12-02 09:00 UTC = 17:00 +08:00: alice's week (shift 0).


def ask(app: App, text: str, user: str = "alice") -> str:
    return app.session.handle(Inbound(user, f"c-{user}", text))


def lookup(app: App) -> tuple[str | None, str | None]:
    assert app.deps.oncall is not None
    return app.deps.oncall(Workflow(name="w", project="p", team="data"), app.deps.clock())


def test_oncall_shows_my_team_and_all_teams(oncall_app: OnCallApp) -> None:
    app = oncall_app()
    mine = ask(app, "/oncall", user="bob")
    assert "**data**: primary Alice (alice), secondary Bob (bob)" in mine
    assert "2026-11-30 10:00 +08:00 – 2026-12-07 10:00 +08:00, weekly" in mine and "reports" not in mine
    everyone = ask(app, "/oncall all", user="bob")
    assert (
        "**data**" in everyone and "**reports**: primary Alice (alice), secondary Carol (carol)" in everyone
    )
    assert "+01:00" in everyone  # the reporting team's hand-offs in its own zone
    assert (
        "daily_sales → wangwu" in everyone and "order_sync →" not in everyone
    )  # a workflow without a team pages its own list
    assert "**reports**" in ask(app, "/oncall", user="dave")  # in no rotation: every team
    assert "unknown team 'dta' (did you mean 'data'?)" in ask(app, "/oncall dta")


def test_take_for_two_hours_then_it_expires_by_itself(
    oncall_app: OnCallApp, clock: FakeClock, db_url: str
) -> None:
    app = oncall_app(db_url)
    assert lookup(app) == ("alice", "bob")
    reply = ask(app, "/oncall take 2h", user="lisi")
    assert (
        "You are on call for data from now until 2026-12-02 19:00 +08:00 (instead of Alice (alice))" in reply
    )
    assert lookup(app) == ("lisi", "bob")
    assert "override #1: 李四 (lisi) took the shift" in ask(app, "/oncall")
    other = oncall_app(db_url)  # another replica on the same store sees it
    assert lookup(other) == ("lisi", "bob")
    clock.advance(hours=2)
    assert lookup(app) == ("alice", "bob") and "override" not in ask(app, "/oncall")
    audit = app.deps.audit.search(kind="oncall")
    assert [(a["actor"], a["outcome"]) for a in audit] == [("lisi", "take")]
    assert audit[0]["detail"]["hours"] == 2 and audit[0]["detail"]["replaces"] == "alice"


def test_take_without_a_duration_lasts_until_the_hand_off(oncall_app: OnCallApp, clock: FakeClock) -> None:
    app = oncall_app()
    assert "until 2026-12-07 10:00 +08:00" in ask(app, "/oncall take", user="bob")
    assert lookup(app) == ("bob", "alice")  # the taker was the secondary: they change places
    clock.advance(days=5)  # Monday 10:00 +08:00: lisi's week begins, bob's take ended
    assert lookup(app) == ("bob", "lisi")  # bob's own week as primary (shift 1)
    assert "is the primary of data already" in ask(app, "/oncall take", user="bob")


def test_swap_by_display_name_today_then_tomorrow_it_is_gone(oncall_app: OnCallApp, clock: FakeClock) -> None:
    app = oncall_app()
    reply = ask(app, "/oncall swap @李四 today", user="alice")
    assert (
        "李四 (lisi) covers your data duty from 2026-12-02 17:00 +08:00 to 2026-12-03 00:00 +08:00" in reply
    )
    assert lookup(app) == ("lisi", "bob")
    clock.advance(hours=7)  # midnight in Shanghai
    assert lookup(app) == ("alice", "bob")
    assert [a["outcome"] for a in app.deps.audit.search(kind="oncall")] == ["swap"]


def test_swap_and_take_errors_name_the_bad_argument(oncall_app: OnCallApp) -> None:
    app = oncall_app()
    assert "@zhaoliu is not in the rotation of data (members: Alice (alice), Bob (bob), 李四 (lisi))" in ask(
        app, "/oncall swap @zhaoliu today data"
    ).replace("＠", "@")
    assert "you cannot swap with yourself (alice)" in ask(app, "/oncall swap @alice today")
    assert "'someday' is not a period" in ask(app, "/oncall swap @bob someday")
    assert "'2026-12-01' is over already" in ask(app, "/oncall swap @bob 2026-12-01")
    assert "'5d' is out of range: an override lasts 15 minutes to 48 hours" in ask(app, "/oncall take 5d")
    assert "'5m' is out of range" in ask(app, "/oncall take 5m")
    assert "'2x' is not a duration" in ask(app, "/oncall take 2x")
    assert "dave is in no on-call rotation" in ask(app, "/oncall take 2h", user="dave")
    assert "alice is in several rotations (data, reports): name the team" in ask(app, "/oncall take 2h")
    assert "carol is not in the rotation of data" in ask(app, "/oncall take 2h data", user="carol")
    assert "name who covers your shift" in ask(app, "/oncall swap", user="bob")
    # bob is secondary this week: he has a duty today; lisi has none
    assert "lisi has no data duty in today (on call then: alice, bob); nothing to swap" in ask(
        app, "/oncall swap @bob today", user="lisi"
    )
    assert app.deps.oncall is not None and lookup(app) == ("alice", "bob")  # nothing was stored
    refused = app.deps.audit.search(kind="oncall")
    assert refused and all(a["outcome"] == "refused" for a in refused)


def test_oncall_answers_in_chinese(oncall_app: OnCallApp) -> None:
    app = oncall_app()
    reply = ask(app, "/oncall swap @李四 今天", user="bob")
    assert "替你值班 data" in reply


def test_help_lists_oncall_for_everyone(oncall_app: OnCallApp) -> None:
    app = oncall_app()
    listing = ask(app, "/help", user="alice")
    assert "/oncall take [2h] [TEAM]" in listing and "/oncall swap @USER" in listing
    assert "Members of the rotation only" in ask(app, "/help oncall", user="alice")
