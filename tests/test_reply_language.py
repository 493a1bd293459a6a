"""Replies in the conversation's language (issue 16 item 3): a Chinese message gets Chinese, an English
one English, for the gate's reasons, /tasks and /task N. The model-facing English stays in the audit."""

from __future__ import annotations

from tests.conftest import MakeApp
from xihe.agent.inbound import Inbound
from xihe.integrations.fakes.llm_server import ScriptedLLM, call, say


def ask(app, user: str, text: str, conv: str) -> str:  # type: ignore[no-untyped-def]
    return app.session.handle(Inbound(user, conv, text))


def test_the_gates_reason_in_a_confirmation_prompt_follows_the_language(
    make_app: MakeApp, llm: ScriptedLLM
) -> None:
    app = make_app()
    llm.add(call("write_note", note="备注", environment="test"))
    zh = ask(app, "alice", "在测试环境写一条备注", "zh")
    assert "⚠️ write_note 是在 test 上的写操作：你 /confirm 之后才会执行。" in zh
    assert "is a write" not in zh
    llm.add(call("write_note", note="memo", environment="prod"))
    en = ask(app, "bob", "write a memo on prod", "en")
    assert (
        "⚠️ write_note writes to production environment prod: it needs your /confirm and an "
        "approver's /approve." in en
    )
    # the audit keeps the English reason whatever the conversation's language
    reasons = [e["reason"] for e in app.deps.audit.search(kind="gate")]
    assert "write_note is a write on test: it runs only after your /confirm" in reasons


def test_tasks_and_task_n_speak_the_conversations_language(make_app: MakeApp, llm: ScriptedLLM) -> None:
    app = make_app()
    llm.add(call("always_fail", reason="磁盘满了"), say("失败了"))
    ask(app, "alice", "请帮我跑一下这个会失败的工具", "zh")
    tasks_zh = ask(app, "alice", "/tasks", "zh")
    assert "#1" in tasks_zh and "请帮我跑一下" in tasks_zh and "对话" in tasks_zh
    task_zh = ask(app, "alice", "/task 1", "zh")
    assert task_zh.startswith("任务 #1") and "创建于" in task_zh and "当前步骤" in task_zh
    assert "created" not in task_zh and "current step" not in task_zh
    assert "输入：reason: 磁盘满了" in task_zh and '{"reason"' not in task_zh  # arguments read as text
    llm.add(call("echo", text="hi"), say("done"))
    ask(app, "alice", "echo hi please", "en")
    tasks_en = ask(app, "alice", "/tasks", "en")
    assert "- #2 2026-12-02 17:00 done chat: echo hi please" in tasks_en  # when, in the team's zone
    task_en = ask(app, "alice", "/task 2", "en")
    assert task_en.startswith("Task #2 [done] chat by alice: echo hi please") and "current step:" in task_en
    assert ask(app, "alice", "/task 99", "zh") == "没有任务 99。"
    assert ask(app, "alice", "/task 99", "en") == "There is no task 99."
    assert "你" not in ask(app, "bob", "/tasks", "new") and "no tasks" in ask(app, "bob", "/tasks", "new")
    assert "还没有任务" in ask(app, "bob", "/tasks 看看", "新")


def test_a_chinese_name_in_an_english_sentence_leaves_it_english() -> None:
    from xihe.agent.i18n import lang_of

    assert lang_of("backfill 坏任务 for 2026-11-30") == "en"  # the workflow's alias, not the user's language
    assert lang_of("把 order_sync 补跑一下") == "zh"  # an identifier is not an English word
    assert lang_of("/run 订单同步 昨天") == "zh"


def test_confirm_approve_and_reject_answer_each_person_in_their_language(
    make_app: MakeApp, llm: ScriptedLLM
) -> None:
    notes: list[tuple[str, str]] = []
    app = make_app(notify=lambda conv, text: notes.append((conv, text)))
    # a Chinese requester, an English approver
    llm.add(call("write_note", note="上线", environment="prod"))
    ask(app, "bob", "在生产环境写一条备注", "zh")
    assert ask(app, "bob", "/confirm 9", "zh") == "没有待处理的操作 9。"
    assert ask(app, "bob", "/approve 1", "zh").startswith("未批准：")  # one's own write
    assert ask(app, "carol", "/approve x", "ops") == "/approve needs the numeric action id, e.g. /approve 12."
    assert ask(app, "carol", "/approve 1", "ops") == "Approved action 1; it runs once bob confirms in chat."
    assert notes[-1] == ("zh", "carol 批准了操作 1；你 /confirm 1 之后执行。")  # the requester's language
    # an English requester, a Chinese approver who rejects
    llm.add(call("write_note", note="release", environment="prod"), say("Not written."))
    ask(app, "bob", "write a release note on prod", "en")
    assert ask(app, "carol", "/reject 2 驳回", "运维") == "已驳回操作 2，没有执行任何操作。"
    assert notes[-1][0] == "en" and notes[-1][1].startswith("carol rejected action 2. ")
    assert ask(app, "bob", "/nosuch 看看", "zh") == "没有 /nosuch 这个命令。试试 /help。"


def test_a_task_the_loop_stops_is_explained_in_the_language(make_app: MakeApp, llm: ScriptedLLM) -> None:
    app = make_app([call("echo", text=str(i)) for i in range(3)] * 2, overrides={"loop": {"max_turns": 3}})
    zh = ask(app, "alice", "一直循环下去吧", "zh")
    assert zh == "模型回合达到 3 次仍未完成，我停下了。任务 1 保留了目前做完的部分。"
    en = ask(app, "alice", "loop forever please", "en")
    assert en == "I stopped after 3 model turns without finishing. Task 2 has what was done so far."
    assert app.deps.tasks.get(1).error == "turn limit reached"
    without = make_app(with_llm=False)
    assert ask(without, "alice", "现在怎么样？", "zh") == "没有配置模型，所以我只能执行命令。试试 /help。"
    assert ask(without, "alice", "what is up?", "en").startswith("No model is configured")


def test_without_a_model_a_chinese_greeting_sets_the_language_of_the_commands_after_it(
    make_app: MakeApp,
) -> None:
    """Issue 27 item 7: `你好` then `/foo` with no model used to answer /foo in English (nothing was kept of
    the greeting). It is a task now, failed for want of a model, and its language carries on."""
    app = make_app(with_llm=False, overrides={"language": "en"})
    assert ask(app, "alice", "你好", "zh").startswith("没有配置模型")
    assert ask(app, "alice", "/foo", "zh") == "没有 /foo 这个命令。试试 /help。"
    assert ask(app, "alice", "/foo", "other") == "Unknown command /foo. Try /help."
    (task,) = app.deps.tasks.recent(conversation="zh")
    assert (task.kind, task.status, task.goal, task.error) == (
        "chat",
        "failed",
        "你好",
        "no model is configured",
    )
    assert "#1 2026-12-02 17:00 失败 对话：你好" in ask(app, "alice", "/tasks", "zh")


def test_a_step_the_process_died_in_reads_in_the_conversations_language(
    make_app: MakeApp, llm: ScriptedLLM
) -> None:
    from xihe.agent.frontier import INTERRUPTED

    app = make_app()
    llm.add(say("好的"))
    ask(app, "alice", "随便聊聊", "zh")
    app.deps.tasks.record(1, "tool:9:0", "echo", "failed", app.deps.clock(), error=INTERRUPTED)
    assert "错误：进程在这一步中途停止" in ask(app, "alice", "/task 1", "zh")
    assert "error: the process stopped during this step" in ask(app, "alice", "/task 1 please", "en")


def test_a_conversation_without_a_language_yet_gets_the_configured_one(
    make_app: MakeApp, llm: ScriptedLLM
) -> None:
    app = make_app(overrides={"language": "zh"})
    llm.add(call("write_note", note="release", environment="prod"))
    ask(app, "bob", "write a release note on prod", "en")
    # carol has written nothing in her conversation yet: the team's configured language
    approved = ask(app, "carol", "/approve 1", "ops")
    assert approved.startswith("已批准操作 1；") and "bob" in approved
    assert ask(app, "dave", "/tasks", "d") == "你还没有任务。"
    # a message that shows its language is answered in it, whatever the default
    assert app.deps.lang("show me my tasks", "d2") == "en"
    assert ask(app, "bob", "/tasks", "en").startswith(
        "Your recent tasks"
    )  # bob's conversation showed English
    shipped = make_app()
    assert (
        shipped.deps.lang("/tasks", "fresh") == "en"
        and ask(shipped, "dave", "/tasks", "d") == "You have no tasks yet."
    )
