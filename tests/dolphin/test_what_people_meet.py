"""What people meet at 3 am with DolphinScheduler in chat: `/status` of a failed run says what failed
and how to rerun it, 上周 / last week backfills every date of the week, `/tasks` shows when each task
started and leaves out read-only `/status` queries, and `/stauts` gets a did-you-mean."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from tests.dolphin.conftest import BAD_HOST
from tests.dolphin.support import Bot
from xihe.integrations.fakes.llm_server import ScriptedLLM, say
from xihe.tools.dolphin.dates import parse_dates

D = date
SHANGHAI = ZoneInfo("Asia/Shanghai")
NOW = datetime(2026, 12, 3, 4, 0, tzinfo=UTC)  # Thursday 2026-12-03, noon in Shanghai


@pytest.mark.parametrize(
    ("text", "first", "last"),
    [
        ("上周", D(2026, 11, 23), D(2026, 11, 29)),  # Monday to Sunday
        ("上周的", D(2026, 11, 23), D(2026, 11, 29)),
        ("上星期", D(2026, 11, 23), D(2026, 11, 29)),
        ("last week", D(2026, 11, 23), D(2026, 11, 29)),
        ("上上周", D(2026, 11, 16), D(2026, 11, 22)),
        ("本周", D(2026, 11, 30), D(2026, 12, 3)),  # this week: up to today
        ("this week", D(2026, 11, 30), D(2026, 12, 3)),
        ("上个月", D(2026, 11, 1), D(2026, 11, 30)),
        ("上月", D(2026, 11, 1), D(2026, 11, 30)),
        ("last month", D(2026, 11, 1), D(2026, 11, 30)),
        ("这个月", D(2026, 12, 1), D(2026, 12, 3)),
        ("上周一", D(2026, 11, 23), D(2026, 11, 23)),  # a weekday stays one date
    ],
)
def test_a_week_or_a_month_is_every_date_of_it(text: str, first: date, last: date) -> None:
    dates = parse_dates(text, NOW, "Asia/Shanghai")
    assert dates == [first + timedelta(days=i) for i in range((last - first).days + 1)]


def test_last_month_in_january_is_last_december() -> None:
    dates = parse_dates("上个月", datetime(2027, 1, 10, 4, tzinfo=UTC), "Asia/Shanghai")
    assert (dates[0], dates[-1], len(dates)) == (D(2026, 12, 1), D(2026, 12, 31), 31)


def test_run_last_week_is_a_backfill_of_seven_dates(bot_for: Callable[..., Bot]) -> None:
    bot = bot_for("3.3", with_llm=False)
    ask = bot.say("alice", "/run 坏任务 上周")
    today = bot.app.deps.clock().astimezone(UTC).date()  # the simulated clock: a Wednesday or so
    monday = today - timedelta(days=today.weekday() + 7)
    assert f"业务日期 {monday} … {monday + timedelta(days=6)}" in ask
    assert "（共 7 个日期，依次运行）" in ask


def test_status_of_a_failed_run_says_what_failed_and_how_to_rerun(
    bot_for: Callable[..., Bot], llm: ScriptedLLM
) -> None:
    bot = bot_for("3.3")
    bot.say("alice", "/run 坏任务 2026-11-30")
    bot.say("alice", "/confirm")
    (key,) = [w.key for w in bot.app.deps.dolphin.watches.active()]
    bot.poll_until_done(key)
    (inst,) = bot.sim.instances_of("broken_sync")
    status = bot.say("alice", f"/status {inst.id}")
    assert f"**broken_sync** #{inst.id} for 2026-11-30: FAILURE 2/3 tasks, failed load" in status
    assert f"- task **load** FAILURE on {BAD_HOST} (retries 1/1): " in status and "SQLException" in status
    assert status.endswith(f"`/rerun {inst.id}` reruns the failed tasks.")

    llm.add(say("好的"))
    bot.say("alice", "你好", "zh")  # a Chinese conversation
    zh = bot.say("alice", f"/status {inst.id}", "zh")
    assert f"- 任务 **load** FAILURE，节点 {BAD_HOST}（重试 1/1）：" in zh and "SQLException" in zh
    assert zh.endswith(f"发送 `/rerun {inst.id}` 重跑失败的任务。")

    tasks = bot.say("alice", "/tasks")
    lines = tasks.splitlines()
    assert lines[0] == "Your recent tasks (times in Asia/Shanghai +08:00):"
    assert [line.split()[1] for line in lines[1:-1]] == ["#3", "#1"]  # 你好 and /run; not the /status queries
    assert lines[2].startswith(
        "- #1 " + bot.app.deps.tasks.get(1).created_at.astimezone(SHANGHAI).strftime("%Y-%m-%d %H:%M")
    )
    assert lines[-1] == "(and 2 read-only queries such as /status, not listed; `/task ID` shows any task)"
    assert bot.app.deps.tasks.get(2).kind == "query" and "查询" in bot.say("alice", "/task 2", "zh")


def test_a_mistyped_command_gets_a_did_you_mean(bot_for: Callable[..., Bot]) -> None:
    bot = bot_for("3.3", with_llm=False)
    assert (
        bot.say("alice", "/stauts 101")
        == "Unknown command /stauts. Did you mean `/status`? (/help lists them all)"
    )
    assert bot.say("alice", "/xyzzy") == "Unknown command /xyzzy. Try /help."
