"""/schedule: show the cron, zone, state and next fire times; off (reminded while it stays off) and on."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from zoneinfo import ZoneInfo

from tests.dolphin.support import Bot, ask_id
from xihe.agent.dolphin.schedule_reminder import remind_schedules


def test_schedule_off_is_reminded_then_on_again(bot_for: Callable[..., Bot], version: str) -> None:
    bot = bot_for(version, with_llm=False)
    schedule = bot.sim.add_schedule("daily_backfill", "0 30 2 * * ? *", "Asia/Shanghai")
    shown = bot.say("alice", "/schedule daily_backfill")
    assert (
        "Schedule of **daily_backfill** (project etl): `0 30 2 ＊ ＊ ? ＊` (Asia/Shanghai), ONLINE" in shown
    )  # encoded: outside text
    assert shown.count("02:30:00") == 5  # the next five fire times, from DolphinScheduler's preview

    ask = bot.say("alice", "/schedule daily_backfill off")
    assert "take the schedule of daily_backfill" in ask and "/confirm" in ask
    assert "is now OFFLINE" in bot.say("alice", "/confirm")
    assert schedule.online is False
    refused = bot.say("alice", "/schedule daily_backfill off")
    assert "already OFFLINE; nothing was sent" in refused and "/confirm" not in refused

    bot.sim.advance(60 * 60)
    assert remind_schedules(bot.app) == 0  # not yet: 120 minutes by default
    bot.sim.advance(61 * 60)
    assert remind_schedules(bot.app) == 1
    (reminder,) = bot.messages("cli:alice", "⏰")
    assert "daily_backfill (project etl) is still OFFLINE: alice took it offline" in reminder
    assert remind_schedules(bot.app) == 0  # once

    bot.say("alice", "/schedule daily_backfill on")
    assert "is ONLINE again" in bot.say("alice", "/confirm")
    assert schedule.online is True


def test_a_schedule_turned_on_elsewhere_is_not_reminded(bot_for: Callable[..., Bot], version: str) -> None:
    bot = bot_for(version, with_llm=False)
    schedule = bot.sim.add_schedule("daily_backfill", "0 0 3 * * ? *")
    bot.say("alice", "/schedule daily_backfill off")
    bot.say("alice", "/confirm")
    schedule.online = True  # someone put it back online in the DolphinScheduler UI
    bot.sim.advance(3 * 60 * 60)
    assert remind_schedules(bot.app) == 0 and bot.messages("cli:alice", "⏰") == []


def test_no_schedule_is_said(bot_for: Callable[..., Bot], version: str) -> None:
    bot = bot_for(version, with_llm=False)
    assert "has no schedule in DolphinScheduler" in bot.say("alice", "/schedule daily_backfill off")


def test_next_fire_times_start_at_the_schedules_start_and_stop_at_its_end(
    bot_for: Callable[..., Bot], version: str
) -> None:
    """DolphinScheduler previews from the later of now and the schedule's startTime, up to its endTime."""
    bot = bot_for(version, with_llm=False)
    schedule = bot.sim.add_schedule("daily_backfill", "0 30 2 * * ? *", "Asia/Shanghai")
    now = bot.sim.clock()
    schedule.start_time = f"{now + timedelta(days=10):%Y-%m-%d} 00:00:00"  # UTC, as the API writes it
    shown = bot.say("alice", "/schedule daily_backfill")
    first = (now + timedelta(days=10)).astimezone(ZoneInfo("Asia/Shanghai"))
    if first.hour >= 8:  # 00:00 UTC is 08:00 in Shanghai: that day's 02:30 is before the start
        first += timedelta(days=1)
    assert f"Next fire times: {first:%Y-%m-%d} 02:30:00" in shown and shown.count("02:30:00") == 5
    schedule.start_time = "2026-01-01 00:00:00"
    schedule.end_time = f"{now + timedelta(hours=30):%Y-%m-%d %H:%M:%S}"
    assert bot.say("alice", "/schedule daily_backfill").count("02:30:00") in (1, 2)
    schedule.end_time = f"{now - timedelta(days=1):%Y-%m-%d %H:%M:%S}"  # the window is over
    gone = bot.say("alice", "/schedule daily_backfill")
    assert "No fire times ahead: the schedule is valid 2026-01-01 00:00:00 .. " in gone, gone


def test_an_offline_workflows_schedule_is_shown_and_not_put_online(
    bot_for: Callable[..., Bot], version: str
) -> None:
    """DS puts a schedule online only for an online definition (50004): refused before anything is sent."""
    bot = bot_for(version, with_llm=False)
    bot.sim.definition("daily_backfill").online = False
    bot.sim.add_schedule("daily_backfill", "0 30 2 * * ? *", online=False)
    assert "`0 30 2 ＊ ＊ ? ＊` (Asia/Shanghai), OFFLINE" in bot.say("alice", "/schedule daily_backfill")
    bot.sim.reset_counts()
    refused = bot.say("alice", "/schedule daily_backfill on")
    assert "workflow daily_backfill (project etl) is OFFLINE" in refused and "(50004)" in refused, refused
    assert "nothing was sent" in refused and "/confirm" not in refused
    assert not [k for k in bot.sim.counts if k.startswith("POST")]


def test_a_production_schedule_goes_off_only_once_an_approver_approves(
    bot_for: Callable[..., Bot], version: str
) -> None:
    bot = bot_for(version, with_llm=False)
    schedule = bot.sim.add_schedule("order_sync", "0 0 1 * * ? *")  # order_sync runs in prod
    ask = bot.say("bob", "/schedule order_sync off")
    assert "/confirm" in ask and "prod" in ask
    waiting = bot.say("bob", f"/confirm {ask_id(ask)}")
    assert "approv" in waiting and schedule.online is True  # bob's yes alone sends nothing
    assert "is now OFFLINE" in bot.say("carol", f"/approve {ask_id(ask)}")
    assert schedule.online is False
    assert [t for p, t in bot.sim.writes if p.endswith("/offline")] == [bot.sim.token]
