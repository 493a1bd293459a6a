"""Without a model, a free-text run request is answered with the command that does it (issue 27 item 7):
`把订单同步任务补跑一下昨天的` suggests `/run 订单同步 昨天`, in the conversation's language. It used to
say only that no model is configured."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.dolphin.support import WORKFLOWS, Bot
from xihe.config.workflows import WorkflowsConfig
from xihe.tools.dolphin.hint import run_command

KNOWN = WorkflowsConfig.model_validate(WORKFLOWS)


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("把订单同步任务补跑一下昨天的", "/run 订单同步 昨天"),
        ("订单同步 12月1日到3日 重跑一下", "/run 订单同步 12月1日到3日"),
        ("补数 order_sync 2026-12-01..2026-12-03", "/run order_sync 2026-12-01..2026-12-03"),
        ("please backfill ORDER_SYNC for yesterday", "/run order_sync yesterday"),
        ("启动一下坏任务", "/run 坏任务"),
        ("rerun broken_sync for last monday", "/run broken_sync last monday"),
    ],
)
def test_a_run_request_names_its_command(text: str, command: str) -> None:
    assert run_command(text, KNOWN) == command


@pytest.mark.parametrize(
    "text",
    ["订单同步昨天的状态怎么样？", "把 nosuch_flow 补跑一下昨天的", "where is order_sync defined?", "你好"],
)
def test_no_command_without_a_known_workflow_and_a_word_that_asks_for_a_run(text: str) -> None:
    assert run_command(text, KNOWN) is None


def test_without_a_model_the_reply_names_the_run_command(bot_for: Callable[..., Bot]) -> None:
    bot = bot_for("3.2", with_llm=False)
    reply = bot.say("alice", "把订单同步任务补跑一下昨天的", "zh")
    assert reply == "没有配置模型，所以我只能执行命令。你要的可以这样做：`/run 订单同步 昨天`"
    english = bot.say("alice", "backfill order_sync for yesterday", "en")
    assert english.endswith("This one does what you asked: `/run order_sync yesterday`")
    assert bot.say("alice", "你好", "zh") == "没有配置模型，所以我只能执行命令。试试 /help。"
    assert bot.sim.starts == []  # nothing ran: the command is only named
