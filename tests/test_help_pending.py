"""Chat for people: /help fits the user (their commands only, one example each, /help CMD for more),
/pending says what waits for whom, /cancel N means action N, replies follow the user's language."""

from __future__ import annotations

import re

from tests.conftest import MakeApp
from xihe.agent.i18n import lang_of
from xihe.agent.inbound import Inbound
from xihe.integrations.fakes.llm_server import ScriptedLLM, call, say


def ask(app, user: str, text: str, conv: str | None = None) -> str:  # type: ignore[no-untyped-def]
    return app.session.handle(Inbound(user, conv or f"c:{user}", text))


def test_lang_of_reads_the_script_not_the_command() -> None:
    assert lang_of("把订单同步补跑一下") == "zh"
    assert lang_of("backfill order_sync") == "en"
    assert lang_of("/help") is None and lang_of("/confirm 12") is None and lang_of("12") is None


def test_help_is_short_and_lists_only_what_the_user_may_run(make_app: MakeApp) -> None:
    app = make_app()
    alice, carol = ask(app, "alice", "/help"), ask(app, "carol", "/help")
    assert len(alice.encode()) < 1500
    assert "/approve" not in alice and "/approve ID" in carol
    for line in (ln for ln in alice.splitlines() if ln.startswith("- `/")):
        assert "e.g. `/" in line, line  # one example each
    assert "`/help CMD` explains one command" in alice


def test_help_for_one_command(make_app: MakeApp) -> None:
    app = make_app()
    detail = ask(app, "alice", "/help cancel")
    assert "`/cancel ID` always means action ID" in detail and "e.g. `/cancel 12`" in detail
    assert "There is no command /approve you may use" in ask(app, "alice", "/help approve")
    assert "/approve" in ask(app, "carol", "/help approve")


def test_help_answers_in_the_conversations_language(make_app: MakeApp, llm: ScriptedLLM) -> None:
    app = make_app([say("好的")])
    ask(app, "alice", "你好，帮我看看", conv="zh")
    help_zh = ask(app, "alice", "/help", conv="zh")
    assert "你可以：" in help_zh and "执行等你确认的操作" in help_zh and "What you may do" not in help_zh
    assert "What you may do here:" in ask(app, "alice", "/help", conv="other")


def _prod_write(app, llm: ScriptedLLM, user: str = "bob", note: str = "rotate keys") -> int:  # type: ignore[no-untyped-def]
    llm.add(call("write_note", note=note, environment="prod"))
    reply = ask(app, user, f"write the note {note} on prod")
    return int(re.search(r"/confirm (\d+)", reply).group(1))  # type: ignore[union-attr]


def test_pending_tells_what_waits_for_whom(make_app: MakeApp, llm: ScriptedLLM) -> None:
    app = make_app()
    action = _prod_write(app, llm)
    mine = ask(app, "bob", "/pending")
    assert f"#{action} write_note on prod" in mine
    assert "waiting for bob's /confirm, then an approver (carol, dave)" in mine
    assert re.search(r"expires \d\d:\d\d:\d\d \+08:00", mine)
    assert "Nothing is waiting." in ask(app, "alice", "/pending")  # not hers, and she is no approver
    ask(app, "bob", f"/confirm {action}")
    carol = ask(app, "carol", "/pending")
    assert "waiting for an approver: carol, dave" in carol and f"`/approve {action}`" in carol


def test_cancel_n_means_action_n_and_never_a_task(make_app: MakeApp, llm: ScriptedLLM) -> None:
    app = make_app()
    action = _prod_write(app, llm)  # bob's task 1, action 1
    second = _prod_write(app, llm, note="second")
    task_of_second = app.deps.pending.get(second).task_id
    # alice's /cancel of bob's action number: refused, and nothing of bob's changes
    assert "There is no waiting action" in ask(app, "alice", f"/cancel {action}")
    assert app.deps.pending.get(action).status == "pending"
    # a number that is only a task of bob's (no such action): bob is told how to cancel the task
    stray = max(task_of_second, second) + 1
    app.deps.tasks.create(kind="chat", owner="bob", conversation="c:bob", goal="x", now=app.deps.clock(),
                          status="running")  # fmt: skip
    reply = ask(app, "bob", f"/cancel {stray}")
    assert f"There is no waiting action {stray} of yours." in reply and f"`/cancel task {stray}`" in reply
    assert app.deps.tasks.get(stray).status == "running"
    assert f"Task {stray} cancelled." in ask(app, "bob", f"/cancel task {stray}")
    assert f"Cancelled action {second}" in ask(app, "bob", f"/cancel {second}")
    assert app.deps.pending.get(action).status == "pending"  # the other action is untouched


def test_the_confirmation_prompt_speaks_the_users_language(make_app: MakeApp, llm: ScriptedLLM) -> None:
    app = make_app()
    llm.add(call("write_note", note="备注", environment="test"))
    zh = ask(app, "alice", "帮我写一条备注", conv="zh")
    assert "请在 15 分钟内回复 `/confirm 1`（或“确认执行”）来执行" in zh and "Reply" not in zh
    assert "note: 备注 · environment: test" in zh  # the arguments as text, not JSON
    llm.add(call("write_note", note="memo", environment="test"))
    en = ask(app, "alice", "write a memo please", conv="en")
    assert "Reply `/confirm 2` (or 确认执行) within 15 minutes to run it, or `/cancel 2`." in en
