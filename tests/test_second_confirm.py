"""A second /confirm while a production write waits for an approver says so, naming who may approve,
in the conversation's language; a mistyped command is answered with the command it resembles."""

from __future__ import annotations

from tests.conftest import MakeApp
from xihe.agent.inbound import Inbound
from xihe.integrations.fakes.llm_server import ScriptedLLM, call, say


def ask(app, text: str, user: str = "bob", conv: str = "c1") -> str:  # type: ignore[no-untyped-def]
    return app.session.handle(Inbound(user, conv, text))


def test_a_second_confirm_names_who_may_approve(make_app: MakeApp, llm: ScriptedLLM) -> None:
    app = make_app([call("write_note", note="prod!", environment="prod"), say("Written to prod.")])
    ask(app, "write to prod")
    assert "waiting for an approver" in ask(app, "/confirm 1")
    waiting = "Action 1 is confirmed; waiting for carol or dave to `/approve 1`."
    assert ask(app, "/confirm") == waiting  # was: "Nothing is waiting for your /confirm"
    assert ask(app, "/confirm 1") == waiting  # was: "Action 1 is confirmed; it cannot be confirmed again."
    assert (
        ask(app, "确认执行") == "操作 1 你已确认；正在等待 carol 或 dave 发送 `/approve 1` 批准。"
    )  # said in Chinese
    assert (
        ask(app, "/confirm", conv="elsewhere") == "Nothing is waiting for your /confirm in this conversation."
    )
    assert ask(app, "/confirm 1", user="alice") == "Action 1 is not waiting for your confirmation here."
    assert "it ran: Written to prod." in ask(app, "/approve 1", user="carol", conv="c9")
    assert ask(app, "/confirm") == "Nothing is waiting for your /confirm in this conversation."


def test_a_second_confirm_in_chinese(make_app: MakeApp, llm: ScriptedLLM) -> None:
    app = make_app([call("write_note", note="上线", environment="prod"), say("好了")])
    ask(app, "请在生产环境写一条上线说明")
    ask(app, "/confirm")
    assert ask(app, "/confirm") == "操作 1 你已确认；正在等待 carol 或 dave 发送 `/approve 1` 批准。"


def test_a_mistyped_command_gets_a_did_you_mean(make_app: MakeApp) -> None:
    app = make_app(with_llm=False)
    assert ask(app, "/tsks") == "Unknown command /tsks. Did you mean `/tasks`? (/help lists them all)"
    assert ask(app, "/comfirm") == "Unknown command /comfirm. Did you mean `/confirm`? (/help lists them all)"
    assert ask(app, "/nope") == "Unknown command /nope. Try /help."
