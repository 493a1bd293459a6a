"""The WeCom feature in-process: senders for late results, progress throttling (finals never dropped),
AI-bot fallbacks, the bounded queue spilling into the database, and a graceful stop."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from tests.serve.harness import AGENT_ID, CORP_ID, SECRET, WECOM_ENV, serve_config, wait_until
from xihe.agent.app import App, build_app
from xihe.agent.clock import FakeClock
from xihe.agent.deps import Progress
from xihe.agent.wecom.feature import CHANNEL, Gateway
from xihe.integrations.wecom.fake import FakeWeCom
from xihe.integrations.wecom.inbound import CHANNEL_APP, InboundMessage

APP_CONV = f"wecom:app:{AGENT_ID}:alice"
BOT_CONV = "wecom:aibot:bot1:ops"


@pytest.fixture
def fake(clock: FakeClock) -> Iterator[FakeWeCom]:
    with FakeWeCom(clock) as f:
        f.add_app(CORP_ID, SECRET, AGENT_ID)
        yield f


def _app(
    tmp_path: Path, fake: FakeWeCom, clock: FakeClock, monkeypatch: pytest.MonkeyPatch, **wecom: object
) -> App:
    for k, v in WECOM_ENV.items():
        monkeypatch.setenv(k, v)
    cfg = serve_config(tmp_path / "cfg", fake, wecom={"progress_interval_seconds": 10, **wecom})
    return build_app(cfg, clock=clock, database_url=f"sqlite:///{tmp_path / 'x.db'}", holder="r1")


def test_progress_is_throttled_per_task_and_finals_always_go(
    tmp_path: Path, fake: FakeWeCom, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = _app(tmp_path, fake, clock, monkeypatch)
    notify = app.deps.notify
    notify(APP_CONV, Progress("step 1 of task 7", 7))
    notify(APP_CONV, Progress("step 2 of task 7", 7))  # within 10 s: dropped
    notify(APP_CONV, Progress("step 1 of task 8", 8))  # another task: its own budget
    notify(APP_CONV, "task 7 done")  # a final message is never throttled
    notify(APP_CONV, "task 7: second final")
    clock.advance(10)
    notify(APP_CONV, Progress("step 3 of task 7", 7))
    assert fake.contents("alice") == [
        "step 1 of task 7",
        "step 1 of task 8",
        "task 7 done",
        "task 7: second final",
        "step 3 of task 7",
    ]
    notify(APP_CONV, "x" * 5000)  # longer than 2,048 bytes: split, nothing lost
    assert "".join(fake.contents("alice")[5:]) == "x" * 5000


def test_aibot_late_results_use_the_stream_or_response_url(
    tmp_path: Path, fake: FakeWeCom, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = _app(tmp_path, fake, clock, monkeypatch)
    wecom = app.get(CHANNEL)
    assert wecom is not None
    gw: Gateway = wecom.gateway
    stream = gw.streams.open("m-1", clock(), "收到")
    gw.streams.attach(stream.id, BOT_CONV, fake.new_response_url())
    app.deps.notify(BOT_CONV, Progress("⏳ running", 1))  # progress goes into the open stream
    live = gw.streams.get(stream.id, clock())
    assert live is not None and live.content == "收到\n\n⏳ running" and not live.finish
    app.deps.notify(BOT_CONV, "approved and done")  # a final: the one-shot response_url
    assert [r["markdown"]["content"] for r in fake.responses] == ["approved and done"]
    app.deps.notify(BOT_CONV, "another late result")  # url used: appended to the open stream
    live = gw.streams.get(stream.id, clock())
    assert live is not None and live.content.endswith("another late result")
    gw.streams.update(stream.id, "final", clock(), finish=True)
    app.deps.notify(BOT_CONV, "nowhere to go")
    assert app.deps.metrics.messages.labels("wecom_aibot", "undeliverable")._value.get() == 1


def test_full_memory_queue_spills_to_the_inbox_and_stop_hands_messages_over(
    tmp_path: Path, fake: FakeWeCom, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = _app(tmp_path, fake, clock, monkeypatch, queue_size=1)
    wecom = app.get(CHANNEL)
    assert wecom is not None
    gw: Gateway = wecom.gateway
    gw._stopping.set()  # no workers: watch the queue itself
    messages = [
        InboundMessage("alice", APP_CONV, "/tasks", str(i), 0, str(AGENT_ID), CHANNEL_APP) for i in (1, 2)
    ]
    for m in messages:
        assert not gw.inbox.seen(m.dedupe_key, clock())
        gw.accept(m)
    assert gw.lanes.depth("command") == 1 and gw.inbox.queued() == 2
    # the spilled one is free for any replica right away; the queued one after stop()
    assert gw.inbox.reclaim("r2", clock(), gw.lease) == [messages[1]]
    gw.stop(grace=0)
    assert gw.inbox.reclaim("r2", clock(), gw.lease) == [messages[0]]


def test_worker_answers_and_marks_the_message_done(
    tmp_path: Path, fake: FakeWeCom, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = _app(tmp_path, fake, clock, monkeypatch)
    wecom = app.get(CHANNEL)
    assert wecom is not None
    gw: Gateway = wecom.gateway
    m = InboundMessage("alice", APP_CONV, "/tasks", "5", 0, str(AGENT_ID), CHANNEL_APP)
    gw.inbox.seen(m.dedupe_key, clock())
    gw.accept(m)
    wait_until(lambda: fake.contents("alice"), timeout=10, what="the worker's answer")
    assert fake.contents("alice") == ["You have no tasks yet."]
    gw.stop(grace=5)
    assert gw.inbox.queued() == 0
    assert app.deps.metrics.messages.labels(CHANNEL_APP, "command")._value.get() == 1


def test_a_command_callback_is_recorded_while_question_callbacks_wait_for_intake(
    tmp_path: Path, fake: FakeWeCom, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = _app(tmp_path, fake, clock, monkeypatch, intake_threads=1)
    wecom = app.get(CHANNEL)
    assert wecom is not None
    gw: Gateway = wecom.gateway
    gw._stopping.set()  # no workers: watch what was recorded
    question = InboundMessage("bob", APP_CONV, "what failed last night?", "q1", 0, str(AGENT_ID), CHANNEL_APP)
    command = InboundMessage("alice", APP_CONV, "/tasks", "c1", 0, str(AGENT_ID), CHANNEL_APP)
    for m in (question, command):
        gw.inbox.seen(m.dedupe_key, clock())  # what the route does before dispatch

    async def scene() -> None:
        # the questions' one intake thread is busy
        async with anyio.create_task_group() as tg, gw._intake["chat"]:
            tg.start_soon(gw.dispatch, question)
            with anyio.fail_after(10):
                await gw.dispatch(command)  # does not queue behind the question
            assert gw.lanes.depth("command") == 1 and gw.lanes.depth("chat") == 0
        # the question is recorded once the chat intake frees (the task group waited for it)
        assert gw.lanes.depth("chat") == 1

    anyio.run(scene)
    assert gw.inbox.queued() == 2
