"""`/maint` answers in the conversation's language (issue 16 item 3): listing, on, off, the P0 warning,
refusals and argument errors, with the same ids, scopes and times (team zone, with offset)."""

from __future__ import annotations

from tests.alerts.feature_support import AlertsApp
from xihe.agent.app import App
from xihe.agent.clock import FakeClock
from xihe.agent.inbound import Inbound
from xihe.integrations.fakes.llm_server import ScriptedLLM, say


def ask(app: App, text: str, conv: str, user: str = "dave") -> str:
    return app.session.handle(Inbound(user, conv, text))


def test_maint_in_a_chinese_conversation(
    alerts_app: AlertsApp, llm: ScriptedLLM, clock: FakeClock, db_url: str
) -> None:
    app = alerts_app(db_url)
    llm.add(say("好的。"), say("好的。"))
    ask(app, "今晚要维护订单同步", "zh")
    ask(app, "我没有权限吗", "zh-alice", user="alice")
    assert ask(app, "/maint", "zh") == "当前没有进行中的维护窗口。"
    assert ask(app, "/maint on 30m", "zh-alice", user="alice").startswith(
        "/maint on 需要 admin 角色；alice 的角色："
    )
    on = ask(app, "/maint on 1h workflow:order_sync", "zh")
    assert on.startswith(
        "维护窗口 #1 workflow:order_sync 2026-12-02 17:00 +08:00 – 2026-12-02 18:00 +08:00（dave 设置）已开启："
    )
    assert "⚠️ 它覆盖了 P0 核心工作流 etl/order_sync：" in on and "covers" not in on
    assert (
        ask(app, "/maint", "zh")
        == "#1 workflow:order_sync 2026-12-02 17:00 +08:00 – 2026-12-02 18:00 +08:00（dave 设置）"
    )
    assert ask(app, "/maint on forever", "zh").startswith("'forever' 不是时长：用法：/maint on 30m|2h|1d")
    assert ask(app, "/maint on 8d", "zh") == "维护时长必须在 1 分钟到 7 天之间（收到 8d）"
    assert ask(app, "/maint on 5m project:", "zh") == "范围 'project:' 的 ':' 后面需要一个值"
    assert ask(app, "/maint off 1", "zh") == "已关闭 1 个维护窗口；告警恢复推送。"
    assert ask(app, "/maint off 1", "zh") == "没有匹配的进行中维护窗口，什么也没改。"


def test_maint_in_an_english_conversation(
    alerts_app: AlertsApp, llm: ScriptedLLM, clock: FakeClock, db_url: str
) -> None:
    app = alerts_app(db_url)
    llm.add(say("Sure."))
    ask(app, "we maintain the hosts tonight", "en")
    on = ask(app, "/maint on 2h host:10.0.0.11", "en")
    assert on.startswith(
        "Maintenance #1 host:10.0.0.11 2026-12-02 17:00 +08:00 – 2026-12-02 19:00 +08:00 by dave is on:"
    )
    assert "if they fail on that host" in on and "覆盖" not in on
    assert (
        ask(app, "/maint", "en")
        == "#1 host:10.0.0.11 2026-12-02 17:00 +08:00 – 2026-12-02 19:00 +08:00 by dave"
    )
    assert ask(app, "/maint on forever", "en").startswith("'forever' is not a duration: usage: /maint on")
    assert ask(app, "/maint on 8d", "en") == "maintenance length must be between 1 minute and 7 days (got 8d)"
    assert (
        ask(app, "/maint off host:10.0.0.11", "en")
        == "Closed 1 maintenance window(s); alerts are pushed again."
    )
    assert ask(app, "/maint", "en") == "No maintenance window is open."


def test_a_hostile_maint_scope_is_shown_inert(alerts_app: AlertsApp, clock: FakeClock, db_url: str) -> None:
    """A scope is what the user typed: in the reply it can neither link nor format (WeCom markdown)."""
    app = alerts_app(db_url)
    on = ask(app, "/maint on 1h workflow:[点此处理](http://evil.example/x)", "en")
    assert "[点此处理](" not in on and "［点此处理］(http://evil.example/x)" in on, on
    bad = ask(app, "/maint on **now** workflow:x", "en")
    assert "**now**" not in bad and "＊＊now＊＊" in bad, bad
