"""Inbound chat, whatever the channel: a bounded worker pool over the durable inbox, one conversation
at a time, and progress notes throttled per task.

A channel (WeCom today; Feishu or Slack would be the next) verifies a message, records it in the
inbox (`xihe.agent.inbox.Inbox`, which also de-duplicates it) and calls `Channel.accept`, which
queues it for this replica and returns at once. A worker claims it (exactly one replica does), runs
it through the one `Session` every channel uses, one conversation at a time, and gives the reply to
the channel's `answer`. Late results go through the channel's own senders (`deps.senders`); a
progress note (`deps.Progress`) is dropped when its task had one within `progress_interval`, a
final message never is. `reclaim` takes over queued messages of replicas that died; `stop` waits
for the messages being handled and hands the rest to the other replicas.

A channel subclasses `Channel` with its message type and writes `answer` (and its senders).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Generic

from xihe.agent.deps import Deps, Progress
from xihe.agent.inbound import Inbound
from xihe.agent.inbox import Inbox, M

if TYPE_CHECKING:
    from xihe.agent.tasks import Task


class ProgressThrottle:
    """At most one progress note per (conversation, task) per `interval`; thread-safe."""

    def __init__(self, interval: float, clock: Callable[[], datetime]) -> None:
        self.interval = timedelta(seconds=interval)
        self.clock = clock
        self._last: dict[tuple[str, int | None], datetime] = {}
        self._lock = threading.Lock()

    def allow(self, conversation: str, task_id: int | None) -> bool:
        """True when a note for this task may go now (and records that it went)."""
        now = self.clock()
        key = (conversation, task_id)
        with self._lock:
            last = self._last.get(key)
            if last is not None and now - last < self.interval:
                return False
            self._last[key] = now
            if len(self._last) > 10000:  # forget old tasks
                cutoff = now - max(self.interval * 10, timedelta(minutes=10))
                self._last = {k: t for k, t in self._last.items() if t >= cutoff}
            return True


class Channel(Generic[M]):
    """One chat channel in one replica: its inbox, worker pool and progress throttle.

    `name` is the channel's word in conversations (`<name>:...`), `Inbound.channel`, thread names,
    metrics labels and the logger (`xihe.<name>`); `reply` answers an inbound message (the session).
    """

    def __init__(
        self,
        name: str,
        deps: Deps,
        inbox: Inbox[M],
        reply: Callable[[Inbound], str],
        *,
        workers: int,
        queue_size: int,
        progress_interval: float,
    ) -> None:
        self.name = name
        self.deps = deps
        self.inbox = inbox
        self.reply = reply
        self.workers = workers
        self.log = logging.getLogger(f"xihe.{name}")
        self.throttle = ProgressThrottle(progress_interval, deps.clock)
        self.queue: queue.Queue[str] = queue.Queue(maxsize=queue_size)
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._conv_locks: dict[str, threading.Lock] = {}

    @property
    def lease(self) -> timedelta:
        """How long a queued message stays ours before another replica may take it."""
        return timedelta(seconds=self.deps.settings.core.store.lease_seconds)

    def answer(self, message: M, text: str) -> None:
        """Send the reply to `message` (the channel's part)."""
        raise NotImplementedError

    # ---- intake (runs in the request: must be quick) -------------------------------------------

    def accept(self, message: M) -> None:
        """Record the message as queued for this replica and wake a worker; never does the work itself."""
        self.inbox.enqueue(message, self.deps.holder, self.deps.clock(), self.lease)
        self._offer(message.dedupe_key)

    def _offer(self, key: str) -> None:
        self.start()
        try:
            self.queue.put_nowait(key)
        except queue.Full:
            # the message is safe in the inbox; any replica's reclaim job takes it once it has room
            self.inbox.release_one(key, self.deps.holder)
            self.log.warning("%s queue full; message left in the inbox", self.name, extra={"key": key})
        self.deps.metrics.queue.labels(f"{self.name}_memory").set(self.queue.qsize())

    # ---- workers -------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the worker threads once."""
        with self._lock:
            if self._threads or self._stopping.is_set():
                return
            for i in range(self.workers):
                t = threading.Thread(target=self._work, name=f"{self.name}-worker-{i}", daemon=True)
                t.start()
                self._threads.append(t)

    def _work(self) -> None:
        while not self._stopping.is_set():
            try:
                key = self.queue.get(timeout=0.2)
            except queue.Empty:
                continue
            if self._stopping.is_set():
                break  # left queued in the inbox; shutdown hands it to the other replicas
            try:
                message = self.inbox.claim(key, self.deps.holder, self.deps.clock(), self.lease)
                if message is not None:
                    self.handle(message)
                    self.inbox.done(key, self.deps.clock())
            except Exception:
                self.log.exception("%s worker failed", self.name, extra={"key": key})

    def _conversation_lock(self, conversation: str) -> threading.Lock:
        with self._lock:
            return self._conv_locks.setdefault(conversation, threading.Lock())

    def handle(self, message: M) -> None:
        """Run one message through the session and send the answer (one conversation at a time)."""
        started = time.monotonic()
        metrics = self.deps.metrics
        kind = "command" if message.text.lstrip().startswith("/") else "chat"
        metrics.messages.labels(message.channel, kind).inc()
        try:
            with self._conversation_lock(message.conversation):
                if not message.text.strip():
                    reply = "I can only read text messages. Try /help."
                else:
                    inbound = Inbound(message.user, message.conversation, message.text, channel=self.name)
                    try:
                        reply = self.reply(inbound)
                    except Exception:
                        self.log.exception("%s message failed", self.name, extra={"key": message.dedupe_key})
                        reply = "Sorry, handling your message failed; the error is logged."
                self.answer(message, reply)
        finally:
            elapsed = time.monotonic() - started
            metrics.latency.labels(message.channel).observe(elapsed)
            recent = self.deps.tasks.recent(conversation=message.conversation, limit=1)
            self.log.info(
                "%s message handled",
                self.name,
                extra={
                    "key": message.dedupe_key,
                    "user": message.user,
                    "channel": message.channel,
                    "task_id": recent[0].id if recent else None,
                    "seconds": round(elapsed, 3),
                },
            )

    # ---- progress ------------------------------------------------------------------------------

    def throttled(self, conversation: str, text: str) -> bool:
        """True when `text` is a progress note that must not go now (it is counted as dropped)."""
        if isinstance(text, Progress) and not self.throttle.allow(conversation, text.task_id):
            self.deps.metrics.messages.labels(self.name, "progress_dropped").inc()
            return True
        return False

    def on_step(self, task: Task, step_key: str, tool: str) -> None:
        """Agent step listener: a task of this channel that runs for a while says which step it is on."""
        if not task.conversation.startswith(f"{self.name}:"):
            return
        if self.deps.clock() - task.created_at < self.throttle.interval:
            return  # quick tasks just answer
        try:
            self.deps.notify(task.conversation, Progress(f"⏳ task {task.id}: running `{tool}`…", task.id))
        except Exception:
            self.log.exception("progress message failed", extra={"task_id": task.id})

    # ---- background ----------------------------------------------------------------------------

    def reclaim(self) -> None:
        """Take over queued messages nobody holds (their replica died, or let them go)."""
        room = self.queue.maxsize - self.queue.qsize()
        if room > 0:
            for key in self.inbox.reclaim(self.deps.holder, self.deps.clock(), self.lease, limit=room):
                self._offer(key)
        self.deps.metrics.queue.labels(f"{self.name}_inbox").set(self.inbox.queued())

    def stop(self, grace: float = 20.0) -> None:
        """Stop taking messages, wait up to `grace` s for those being handled, hand the rest over."""
        self._stopping.set()
        deadline = time.monotonic() + grace
        for t in self._threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        handed = self.inbox.release(self.deps.holder)
        if handed:
            self.log.info("%s: %d queued message(s) handed to other replicas", self.name, handed)
