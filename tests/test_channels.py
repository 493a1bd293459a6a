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

    def __init__(self, app: App) -> None:
        inbox = Inbox(app.deps.engine, dataclasses.asdict, lambda data: Note(**data))
        super().__init__(
            "memo",
            app.deps,
            inbox,
            app.session.handle,
            capacity=Capacity(workers=2, model_concurrency=2, queue_size=4),
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
