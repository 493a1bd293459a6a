"""The channel seam: a chat channel other than WeCom reuses the durable inbox, the workers, the
hand-over between replicas and the progress throttle; it only says how a reply is sent."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from tests.conftest import MakeApp
from tests.serve.harness import wait_until
from xihe.agent.app import App
from xihe.agent.channels import Capacity, Channel
from xihe.agent.clock import FakeClock
from xihe.agent.deps import Progress
from xihe.agent.inbox import Inbox
from xihe.integrations.fakes.llm_server import ScriptedLLM, say, slow

SMALL = Capacity(workers=2, model_concurrency=2, queue_size=4)


@dataclass(frozen=True)
class Note:
    """A message of a made-up `memo` channel."""

    user: str
    conversation: str
    text: str
    msgid: str
    channel: str = "memo"

    @property
    def dedupe_key(self) -> str:
        return f"memo:{self.msgid}"


class Memo(Channel[Note]):
    """Answers are collected in a list: everything else is the shared machinery."""

    def __init__(self, app: App, capacity: Capacity = SMALL) -> None:
        inbox = Inbox(app.deps.engine, dataclasses.asdict, lambda data: Note(**data))
        super().__init__(
            "memo",
            app.deps,
            inbox,
            app.session.handle,
            capacity=capacity,
            progress_interval=10,
        )
        self.sent: list[tuple[str, str]] = []

    def answer(self, message: Note, text: str) -> None:
        self.sent.append((message.conversation, text))


def test_a_second_channel_kind_is_deduplicated_handled_and_answered(make_app: MakeApp) -> None:
    memo = Memo(make_app())
    note = Note("alice", "memo:alice", "/tasks", "1")
    assert not memo.inbox.seen(note.dedupe_key, memo.deps.clock())
    assert memo.inbox.seen(note.dedupe_key, memo.deps.clock())  # the platform's retry is recognised
    memo.accept(note)
    wait_until(lambda: memo.sent, timeout=10, what="the worker's answer")
    memo.stop(grace=5)
    assert memo.sent == [("memo:alice", "You have no tasks yet.")]
    assert memo.inbox.queued() == 0
    assert memo.deps.metrics.messages.labels("memo", "command")._value.get() == 1


def test_a_dead_replicas_queued_message_is_taken_over_after_its_lease(
    make_app: MakeApp, clock: FakeClock
) -> None:
    first, second = Memo(make_app()), Memo(make_app())  # two replicas over one database
    first._stopping.set()  # it dies before a worker takes the message
    note = Note("alice", "memo:alice", "/tasks", "2")
    first.inbox.seen(note.dedupe_key, clock())
    first.accept(note)
    second.reclaim()
    assert second.sent == [] and second.inbox.queued() == 1  # still the first replica's
    clock.advance(first.lease.total_seconds() + 1)
    second.reclaim()
    wait_until(lambda: second.sent, timeout=10, what="the survivor's answer")
    second.stop(grace=5)
    assert second.sent == [("memo:alice", "You have no tasks yet.")] and first.sent == []


def test_progress_notes_are_throttled_per_task_and_finals_never(make_app: MakeApp, clock: FakeClock) -> None:
    memo = Memo(make_app())
    assert not memo.throttled("memo:alice", Progress("step 1", 7))
    assert memo.throttled("memo:alice", Progress("step 2", 7))  # within 10 s
    assert not memo.throttled("memo:alice", Progress("step 1", 8))  # another task
    assert not memo.throttled("memo:alice", "a final message")
    clock.advance(10)
    assert not memo.throttled("memo:alice", Progress("step 3", 7))
    assert memo.deps.metrics.messages.labels("memo", "progress_dropped")._value.get() == 1


def _send(memo: Memo, *notes: Note) -> None:
    for note in notes:
        assert not memo.inbox.seen(note.dedupe_key, memo.deps.clock())
        memo.accept(note)


def test_what_did_not_fit_in_memory_is_taken_as_soon_as_a_worker_frees(make_app: MakeApp) -> None:
    # no periodic look and no reclaim job: only a freed worker can bring the spilled messages in
    memo = Memo(make_app(), Capacity(workers=1, model_concurrency=1, queue_size=1, pull_seconds=3600))
    memo._stopping.set()  # hold the workers until all six are in: five spill to the inbox
    _send(memo, *[Note(f"u{i}", f"memo:u{i}", "/tasks", str(i)) for i in range(6)])
    assert memo.lanes.depth("command") == 1 and memo.inbox.queued() == 6
    memo._stopping.clear()
    memo.start()
    wait_until(lambda: len(memo.sent) == 6, timeout=20, what="all six answers")
    memo.stop(grace=5)
    assert sorted(c for c, _ in memo.sent) == [f"memo:u{i}" for i in range(6)]  # each once
    assert memo.inbox.queued() == 0


def test_an_idle_replica_takes_another_replicas_overflow_without_waiting_for_its_lease(
    make_app: MakeApp,
) -> None:
    busy = Memo(make_app(), Capacity(workers=1, model_concurrency=1, queue_size=1))
    busy._stopping.set()  # its workers are all taken: nothing it holds moves
    idle = Memo(make_app(), Capacity(workers=1, model_concurrency=1, queue_size=4, pull_seconds=0.05))
    idle.start()
    _send(busy, *[Note(f"u{i}", f"memo:u{i}", "/tasks", f"x{i}") for i in range(3)])
    wait_until(lambda: len(idle.sent) == 2, timeout=20, what="the idle replica's answers")
    idle.stop(grace=5)
    assert sorted(c for c, _ in idle.sent) == ["memo:u1", "memo:u2"]  # u0 is held by the busy one
    assert busy.sent == [] and busy.inbox.queued() == 1


def test_a_command_is_answered_while_a_slow_model_turn_runs(make_app: MakeApp, llm: ScriptedLLM) -> None:
    llm.add(slow(say("the slow answer"), 30))  # the model takes 30 s
    memo = Memo(make_app(), Capacity(workers=1, model_concurrency=1, queue_size=4))
    _send(memo, Note("alice", "memo:alice", "what failed last night?", "q1"))
    wait_until(lambda: llm.requests, timeout=20, what="the model request")
    _send(memo, Note("bob", "memo:bob", "/tasks", "c1"))
    wait_until(lambda: memo.sent, timeout=20, what="the command's answer")
    assert memo.sent == [("memo:bob", "You have no tasks yet.")]  # the model turn is still out
    memo.stop(grace=0)


def test_over_the_rate_or_the_queue_a_message_gets_a_short_reply_in_its_language(make_app: MakeApp) -> None:
    notes: list[tuple[str, str]] = []
    capacity = Capacity(
        workers=1,
        model_concurrency=1,
        queue_size=1,
        max_waiting=2,
        user_messages_per_minute=2,
        queued_note_seconds=0,
    )
    memo = Memo(make_app(notify=lambda c, t: notes.append((c, t))), capacity)
    memo._stopping.set()  # no worker takes anything: watch what is said at intake
    _send(memo, Note("alice", "memo:alice", "what failed last night?", "1"))  # the chat lane's one place
    _send(memo, Note("alice", "memo:alice", "and the night before?", "2"))  # to the inbox: a note
    _send(memo, Note("alice", "memo:alice", "帮我看看昨晚的任务", "3"))  # her third in a minute
    _send(memo, Note("bob", "memo:bob", "/tasks", "4"))  # the command lane has room
    _send(memo, Note("carol", "memo:carol", "what about today?", "5"))  # a fourth would wait: busy
    wait_until(lambda: len(memo.sent) == 2 and notes, timeout=10, what="the short replies")
    assert memo.sent[0] == ("memo:alice", "你发的消息太多了，请 30 秒后再试。")
    assert memo.sent[1][0] == "memo:carol" and memo.sent[1][1].startswith(
        "Busy right now (4 messages waiting); please try again in "
    )
    assert notes == [("memo:alice", "⏳ Queued: 1 ahead of you, about 2 s.")]
    assert memo.inbox.queued() == 3  # the refused ones are done, not queued
    metrics = memo.deps.metrics.messages
    assert metrics.labels("memo", "limited_user")._value.get() == 1
    assert metrics.labels("memo", "busy")._value.get() == 1


def test_the_metrics_show_lane_waits_turns_in_flight_and_each_model_request(make_app: MakeApp) -> None:
    memo = Memo(make_app([say("Nothing failed last night.")]))
    _send(
        memo,
        Note("alice", "memo:alice", "what failed last night?", "m1"),
        Note("bob", "memo:bob", "/tasks", "m2"),
    )
    wait_until(lambda: len(memo.sent) == 2, timeout=20, what="both answers")
    memo.stop(grace=5)
    value = memo.deps.metrics.registry.get_sample_value
    assert value("xihe_queue_wait_seconds_count", {"channel": "memo", "lane": "chat"}) == 1
    assert value("xihe_queue_wait_seconds_count", {"channel": "memo", "lane": "command"}) == 1
    assert value("xihe_conversations_in_flight", {"channel": "memo"}) == 0  # both turns ended
    assert value("xihe_model_seconds_count") == 1
    assert value("xihe_model_tokens_count", {"kind": "prompt"}) == 1
    assert (value("xihe_model_tokens_sum", {"kind": "completion"}) or 0) > 0


def test_a_pull_claims_only_what_each_lane_has_room_for(make_app: MakeApp) -> None:
    memo = Memo(make_app(), Capacity(workers=1, model_concurrency=1, queue_size=1, pull_seconds=3600))
    memo._stopping.set()  # no worker takes anything: the lanes stay as filled here
    _send(memo, *[Note(f"c{i}", f"memo:c{i}", "/tasks", f"c{i}") for i in range(3)])  # c1, c2 spill
    _send(memo, *[Note(f"q{i}", f"memo:q{i}", f"question {i}", f"q{i}") for i in range(2)])  # q1 spills
    assert (memo.lanes.depth("command"), memo.lanes.depth("chat")) == (1, 1)
    w = memo.lanes.take("chat", timeout=0)  # q0's turn starts: the chat lane has room for one
    assert w is not None and w.key == "memo:q0"
    memo.lanes.done(w)
    # the oldest waiting messages are commands, but the full command lane takes none of them
    assert memo._take_waiting() == 1
    assert (memo.lanes.depth("command"), memo.lanes.depth("chat")) == (1, 1)
    assert memo.lanes.take("chat", timeout=0).key == "memo:q1"  # type: ignore[union-attr]
    # the commands were never claimed and let go again: they wait in the inbox, held by nobody
    assert memo.inbox.reclaim("other", memo.deps.clock(), memo.lease, lane="command") == [
        Note("c1", "memo:c1", "/tasks", "c1"),
        Note("c2", "memo:c2", "/tasks", "c2"),
    ]
