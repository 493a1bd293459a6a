"""Following runs after `/rerun`, stopped backfill chains, expired tokens and starts DS never ran.

Each test drives the bot in chat (commands → gate → /confirm → simulator over HTTP → poll job →
messages) on all three API versions. The simulator behaves like real DolphinScheduler where it is
least kind: 3.1 list rows carry `null` params, a slow master takes a rerun several polls later
(the instance keeps its old FAILURE until then), and a rerun of a failed backfill date goes on
with the rest of the chain under the original marker.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from tests.dolphin.support import Bot
from xihe.agent.clock import FakeClock
from xihe.agent.dolphin.feature import poll_watches

FAILING_RANGE = "2026-11-28..2026-11-30"  # daily_backfill fails on 2026-11-29 (first attempt only)


def _active_key(bot: Bot) -> str:
    (watch,) = bot.app.deps.dolphin.watches.active()
    return str(watch.key)


def test_rerun_of_a_failed_backfill_date_goes_on_with_the_rest_of_the_chain(
    bot_for: Callable[..., Bot], version: str
) -> None:
    bot = bot_for(version, with_llm=False)
    bot.say("alice", f"/run daily_backfill {FAILING_RANGE}")
    assert "Started **daily_backfill**" in bot.say("alice", "/confirm")
    bot.poll_until_done("1:tool:1:0")
    first, failed = bot.sim.instances_of("daily_backfill")
    (success,) = bot.messages("cli:alice", "✅")
    assert success.startswith(f"✅ daily_backfill instance {first.id} for 2026-11-28 ended SUCCESS")
    (failure,) = bot.messages("cli:alice", "❌")
    assert f"daily_backfill instance {failed.id} for 2026-11-29 ended FAILURE" in failure
    assert "**load** FAILURE on 10.0.0.7:1234" in failure and "SQLException" in failure
    # the chain stopped: the user hears which dates did not run and how to go on
    assert "The backfill stopped here: 2026-11-30 (1 date) did not run." in failure
    assert (
        f"`/rerun {failed.id}` reruns the failed tasks and then goes on with the dates that did not run"
        in failure
    )

    bot.say("alice", f"/rerun {failed.id}")
    assert "Rerunning the failed tasks" in bot.say("alice", "/confirm")
    bot.poll_until_done("1:tool:1:0")
    runs = bot.sim.instances_of("daily_backfill")
    assert [(i.schedule_time.day if i.schedule_time else 0, i.state) for i in runs] == [
        (28, "SUCCESS"),
        (29, "SUCCESS"),
        (30, "SUCCESS"),
    ]
    successes = bot.messages("cli:alice", "✅")
    assert [m.split(" for ")[1][:10] for m in successes] == ["2026-11-28", "2026-11-29", "2026-11-30"]
    assert len(bot.messages("cli:alice", "❌")) == 1  # the old FAILURE is not reported again


def test_rerun_taken_late_by_a_slow_master_is_reported_when_it_really_ends(
    bot_for: Callable[..., Bot], version: str
) -> None:
    bot = bot_for(version, with_llm=False)
    bot.say("alice", "/run broken_sync 2026-11-30")
    bot.say("alice", "/confirm")
    bot.poll_until_done("1:tool:1:0")
    (inst,) = bot.sim.instances_of("broken_sync")
    assert inst.state == "FAILURE" and len(bot.messages("cli:alice", "❌")) == 1

    bot.sim.slow_master(150)  # the master takes the rerun command ten polls later
    bot.say("alice", f"/rerun {inst.id}")
    bot.say("alice", "/confirm")
    for _ in range(5):  # DS still shows the old FAILURE, endTime and runTimes
        bot.sim.advance(15)
        poll_watches(bot.app)
    assert inst.state == "FAILURE" and inst.run_times == 1
    assert len(bot.messages("cli:alice", "❌")) == 1 and bot.messages("cli:alice", "✅") == []
    bot.poll_until_done(_active_key(bot))
    assert inst.state == "SUCCESS" and inst.run_times == 2
    (success,) = bot.messages("cli:alice", "✅")
    assert success.startswith(f"✅ broken_sync instance {inst.id} for 2026-11-30 ended SUCCESS")
    assert len(bot.messages("cli:alice", "❌")) == 1


def test_expired_token_tells_the_conversation_once_and_how_to_fix_it(
    bot_for: Callable[..., Bot], version: str
) -> None:
    bot = bot_for(version, with_llm=False)
    bot.say("alice", "/run long_sync")
    bot.say("alice", "/confirm")
    bot.sim.advance(30)
    poll_watches(bot.app)
    bot.sim.expire_token()
    for _ in range(40):
        bot.sim.advance(60)
        poll_watches(bot.app)
    (warning,) = [m for m in bot.messages("cli:alice", "⚠️") if "credentials" in m]
    assert "I can no longer follow long_sync" in warning and "HTTP 401" in warning
    assert "put it in XIHE_DS_TOKEN and restart xihe" in warning
    assert bot.sim.token not in warning

    bot.sim.tokens[bot.sim.token] = bot.sim.clock() + timedelta(days=30)  # renewed in DS
    (inst,) = bot.sim.instances_of("long_sync")
    bot.app.deps.dolphin.client.stop(1000000000001, inst.id)
    bot.poll_until_done("1:tool:1:0")
    assert bot.messages("cli:alice", "⏹️")
    assert len([m for m in bot.messages("cli:alice", "⚠️") if "credentials" in m]) == 1


def test_a_start_ds_never_ran_is_told_with_the_retry_and_the_task_is_not_done(
    bot_for: Callable[..., Bot], version: str, clock: FakeClock
) -> None:
    bot = bot_for(version, with_llm=False)
    bot.sim.fail("/executors/start-", status=502)  # the answer is lost; DS did nothing
    bot.say("alice", "/run daily_backfill 2026-11-28..2026-11-29")
    assert "Start sent, outcome unknown" in bot.say("alice", "/confirm")
    bot.poll_until_done("1:tool:1:0", step=60, limit=2 * 3600)
    assert bot.sim.instances_of("daily_backfill") == []
    (told,) = bot.messages("cli:alice", "⚠️")
    assert "daily_backfill for 2026-11-28..2026-11-29 did not run" in told
    assert "Nothing was started" in told and "+08:00" in told
    assert "`/run daily_backfill 2026-11-28..2026-11-29` starts it again" in told
    task = bot.app.deps.tasks.get(1)
    assert task.status == "failed" and "never created" in (task.error or "")
