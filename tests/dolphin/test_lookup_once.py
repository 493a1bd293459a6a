"""A call's target is looked up once (issue 24): `/rerun 101` reads instance 101 once before the
confirmation prompt and once, fresh, after `/confirm`; the precheck runs again on that fresh read.
A message's language and its sender's identity are derived once and carried on the walk.

Reads are counted where they happen: DolphinScheduler GETs in the simulator's request log, the
conversation-language queries at the SQL engine, identity lookups at `identify`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from sqlalchemy import event

import xihe.agent.loop
import xihe.agent.session
from tests.dolphin.support import Bot
from xihe.agent.gate import Who, identify
from xihe.config.access import AccessConfig

GET_INSTANCE = "GET /dolphinscheduler/projects/{n}/workflow-instances/{n}"
EXECUTE = "POST /dolphinscheduler/projects/{n}/executors/execute"  # rerun and stop


def failed_run(bot: Bot) -> int:
    """A FAILURE instance of broken_sync (its environment, test, needs only the requester's yes)."""
    bot.say("alice", "/run broken_sync 2026-11-30")
    bot.say("alice", "/confirm")
    bot.poll_until_done("1:tool:1:0")
    (inst,) = bot.sim.instances_of("broken_sync")
    assert inst.state == "FAILURE"
    bot.sim.reset_counts()
    return inst.id


def test_rerun_reads_the_instance_once_before_the_prompt_and_once_after_confirm(
    bot_for: Callable[..., Bot],
) -> None:
    bot = bot_for("3.3", with_llm=False)
    inst = failed_run(bot)
    asked = bot.say("alice", f"/rerun {inst}")
    # the prompt still explains what the yes does, from that one read
    assert f"rerun the failed tasks of broken_sync instance {inst} for 2026-11-30, now FAILURE" in asked
    assert bot.sim.counts[GET_INSTANCE] == 1  # was 3: environment, precheck, explanation
    bot.sim.reset_counts()
    # /pending explains the waiting action from its own read of the instance
    waiting = bot.say("alice", "/pending")
    assert (
        f"- #2 rerun the failed tasks of broken_sync instance {inst} for 2026-11-30, now FAILURE" in waiting
    )
    assert bot.sim.counts[GET_INSTANCE] == 1
    bot.sim.reset_counts()
    assert "Rerunning the failed tasks of **broken_sync**" in bot.say("alice", "/confirm")
    assert bot.sim.counts[GET_INSTANCE] == 1  # was 2: environment, run
    assert bot.sim.counts[EXECUTE] == 1


def test_a_run_that_changed_while_waiting_is_refused_after_confirm_on_the_fresh_read(
    bot_for: Callable[..., Bot],
) -> None:
    bot = bot_for("3.3", with_llm=False)
    inst = failed_run(bot)
    assert "/confirm" in bot.say("alice", f"/rerun {inst}")
    # meanwhile someone reruns it in DolphinScheduler itself
    bot.app.deps.dolphin.client.rerun_failed(bot.sim.instances[inst].project.code, inst)
    bot.sim.advance(5)
    assert bot.sim.instances[inst].state == "RUNNING_EXECUTION"
    bot.sim.reset_counts()
    reply = bot.say("alice", "/confirm")
    assert reply == f"Not run: instance {inst} is still RUNNING_EXECUTION; it can be rerun once it has failed"
    assert bot.sim.counts[GET_INSTANCE] == 1 and bot.sim.counts[EXECUTE] == 0
    latest = max(t.id for t in bot.app.deps.tasks.recent(owner="alice"))
    assert bot.app.deps.tasks.get(latest).shown_status == "done · refused"


def test_a_stop_of_a_run_that_ended_while_waiting_is_refused_after_confirm(
    bot_for: Callable[..., Bot],
) -> None:
    bot = bot_for("3.3", with_llm=False)
    bot.say("alice", "/run long_sync")
    bot.say("alice", "/confirm")
    (inst,) = bot.sim.instances_of("long_sync")
    bot.sim.advance(30)
    assert "stop long_sync instance" in bot.say("alice", f"/stop {inst.id}")
    bot.app.deps.dolphin.client.stop(inst.project.code, inst.id)  # stopped in DolphinScheduler meanwhile
    bot.sim.advance(30)
    bot.sim.reset_counts()
    reply = bot.say("alice", "/confirm")
    assert reply == f"Not run: instance {inst.id} already ended STOP; there is nothing to stop"
    assert bot.sim.counts[GET_INSTANCE] == 1 and bot.sim.counts[EXECUTE] == 0


@pytest.fixture
def identities(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every identity lookup of the message path (the session's and the walk's), by user."""
    seen: list[str] = []

    def counting(user: str, access: AccessConfig) -> Who:
        seen.append(user)
        return identify(user, access)

    for module in (xihe.agent.session, xihe.agent.loop):
        monkeypatch.setattr(module, "identify", counting)
    yield seen


def test_a_messages_language_and_identity_are_derived_once(
    bot_for: Callable[..., Bot], identities: list[str]
) -> None:
    bot = bot_for("3.3", with_llm=False)
    inst = failed_run(bot)
    lookups: list[str] = []

    def count(conn, cursor, statement, params, context, executemany) -> None:  # type: ignore[no-untyped-def]
        if statement.startswith("SELECT task.id") and "task.kind = " in statement:
            lookups.append(statement)  # the conversation's last free-text messages: its language

    event.listen(bot.app.deps.engine, "before_cursor_execute", count)
    identities.clear()
    bot.say("alice", f"/rerun {inst}")
    assert len(lookups) == 1 and identities == ["alice"]  # identity was looked up twice
    lookups.clear()
    identities.clear()
    assert "Rerunning" in bot.say("alice", "/confirm")
    # the /confirm message, and the walk of the task it resumes (its goal `/rerun N` names no language)
    assert len(lookups) == 2  # was 4: twice for /confirm, the confirmation and the reply of the walk
    assert identities == ["alice", "alice"]  # the sender; the owner of the resumed task
