"""Inbound chat, whatever the channel: two lanes of workers over the durable inbox, one turn at a
time per conversation and lane, rate limits, and progress notes throttled per task.

A channel (WeCom today; Feishu or Slack would be the next) verifies a message, records it in the
inbox (`xihe.agent.inbox.Inbox`, which also de-duplicates it) and calls `Channel.accept`, which
checks the rate limits, queues it for this replica and returns at once. Explicit commands go to the
`command` lane and its `workers`; free text (model turns) to the `chat` lane, fair per user, and its
own pool of `model_concurrency` threads (`xihe.agent.lanes`). The model pool is plain threads that
spend their time waiting on the model server: the simplest design that keeps hundreds of turns in
flight without the command workers ever waiting behind one, with the session, stores and tools as
they are (blocking). Only `model_cpu_threads` of those threads run Python at once; the others wait
on the model or for their turn (`xihe.agent.cpushare`), so a burst of turns starting together does
not slow the command workers beside them. A worker claims the message (exactly one replica does),
runs it through the one `Session` every channel uses and gives the reply to the channel's `answer`.

What does not fit in memory waits in the inbox, free for any replica: a feeder thread pulls it as
soon as a worker frees (and every `pull_seconds` when idle, for other replicas' overflow), claimed
with the inbox lease, so exactly once. Beyond `max_waiting` a new message gets "busy, try again in
N s"; a message that will wait long gets "queued, N ahead of you". Late results go through the
channel's own senders (`deps.senders`); a progress note (`deps.Progress`) is dropped when its task
had one within `progress_interval`, a final message never is. `reclaim` takes over queued messages
of replicas that died; `stop` waits for the messages being handled and hands the rest over.

A channel subclasses `Channel` with its message type and writes `answer` (and its senders).
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Generic

from xihe.agent.commands import CommandSyntaxError, parse
from xihe.agent.cpushare import CpuShare, waiting
from xihe.agent.deps import Deps, Progress
from xihe.agent.i18n import Catalog, say
from xihe.agent.inbound import Inbound
from xihe.agent.inbox import Inbox, M
from xihe.agent.lanes import LANES, Lane, Lanes, Waiting
from xihe.agent.limits import RateLimits

if TYPE_CHECKING:
    from xihe.agent.tasks import Task


TOLD: Catalog = {
    "queued": {
        "en": "⏳ Queued: {ahead} ahead of you, about {seconds} s.",
        "zh": "⏳ 已排队：前面还有 {ahead} 条，约 {seconds} 秒。",
    },
    "busy": {
        "en": "Busy right now ({waiting} messages waiting); please try again in {seconds} s.",
        "zh": "现在太忙（{waiting} 条消息在排队），请 {seconds} 秒后再试。",
    },
    "user": {
        "en": "Too many messages from you; please try again in {seconds} s.",
        "zh": "你发的消息太多了，请 {seconds} 秒后再试。",
    },
    "global": {
        "en": "Too many messages for me right now; please try again in {seconds} s.",
        "zh": "现在消息太多，请 {seconds} 秒后再试。",
    },
}


@dataclass(frozen=True)
class Capacity:
    """How much one replica's channel takes on (wecom.yaml names each of these)."""

    workers: int = 4  # command workers
    model_concurrency: int = 128  # free-text turns in flight
    model_cpu_threads: int = 2  # of those, how many run Python at once (`xihe.agent.cpushare`)
    intake_threads: int = 4  # per lane: callbacks recorded at once; more wait in arrival order
    queue_size: int = 200  # in memory, per lane
    max_waiting: int = 5000  # in the inbox (all replicas) before "busy"
    user_messages_per_minute: float = 30
    messages_per_second: float = 200
    burst_messages: int = 2000
    queued_note_seconds: float = 10  # "queued, N ahead" when the expected wait is longer
    pull_seconds: float = 1.0  # how often an idle replica looks in the inbox for others' overflow


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
    """One chat channel in one replica: its inbox, lanes and workers, limits and progress throttle.

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
        capacity: Capacity,
        progress_interval: float,
    ) -> None:
        self.name = name
        self.deps = deps
        self.inbox = inbox
        self.reply = reply
        self.capacity = capacity
        self.log = logging.getLogger(f"xihe.{name}")
        self.throttle = ProgressThrottle(progress_interval, deps.clock)
        self.lanes = Lanes(capacity.queue_size)
        self.limits = RateLimits(
            capacity.user_messages_per_minute,
            capacity.messages_per_second,
            capacity.burst_messages,
            deps.clock,
        )
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._pull = threading.Event()  # a worker freed, or the inbox may hold more: the feeder looks
        self._spilled: set[Lane] = set()  # lanes whose messages of ours may wait in the inbox (under _lock)
        self._turn_seconds: dict[Lane, float] = {"command": 0.1, "chat": 1.0}  # moving averages
        self._told = ThreadPoolExecutor(1, thread_name_prefix=f"{name}-told")  # short replies off the request
        self._chat_cpu = CpuShare(capacity.model_cpu_threads)  # the command lane's workers run unshared

    @property
    def lease(self) -> timedelta:
        """How long a queued message stays ours before another replica may take it."""
        return timedelta(seconds=self.deps.settings.core.store.lease_seconds)

    def answer(self, message: M, text: str) -> None:
        """Send the reply to `message` (the channel's part)."""
        raise NotImplementedError

    # ---- intake (runs in the request: must be quick) -------------------------------------------

    def accept(self, message: M) -> None:
        """Queue the message for this replica (or refuse it over a limit); never does the work itself."""
        limited = self.limits.check(message.user)
        if limited is not None:
            which, seconds = limited
            self.inbox.done(message.dedupe_key, self.deps.clock())
            self.deps.metrics.messages.labels(message.channel, f"limited_{which}").inc()
            self._tell(message, which, seconds=seconds)
            return
        lane = self.lane_of(message)
        self.inbox.enqueue(message, self.deps.holder, self.deps.clock(), self.lease, lane)
        self._offer(message, lane, fresh=True)

    def lane_of(self, message: M) -> Lane:
        """`command` for what the session answers without the model (commands, confirm phrases, no text)."""
        if not message.text.strip():
            return "command"
        try:
            command = parse(message.text, tuple(self.deps.settings.core.confirm.phrases))
        except CommandSyntaxError:
            return "command"  # answered with the syntax error
        return "command" if command is not None else "chat"

    def _offer(self, message: M, lane: Lane, *, fresh: bool = False) -> None:
        """Put a message this replica holds in its lane; a full lane leaves it in the inbox for anyone.

        A `fresh` one (just accepted) is refused as busy beyond `max_waiting`, or told its place when
        the wait will be long; one pulled from the inbox was told already.
        """
        self.start()
        w = Waiting(message.dedupe_key, message.user, message.conversation, lane, time.monotonic())
        ahead = self.lanes.push(w)
        if ahead is None:
            waiting = self.inbox.queued() if fresh else 0
            if waiting > self.capacity.max_waiting:  # still ours: no other replica can have taken it
                self.inbox.done(message.dedupe_key, self.deps.clock())
                self.deps.metrics.messages.labels(message.channel, "busy").inc()
                self._tell(message, "busy", waiting=waiting, seconds=self._wait_seconds(lane, waiting))
                return
            # the message is safe in the inbox: the feeder of any replica takes it once a worker frees
            self.inbox.release_one(message.dedupe_key, self.deps.holder, lane)
            self._mark_spilled(lane)
            if fresh:
                self._note_wait(message, lane, waiting - 1)  # all that wait, on any replica, but itself
        elif fresh:
            self._note_wait(message, lane, ahead)
        self.deps.metrics.queue.labels(f"{self.name}_{lane}").set(self.lanes.depth(lane))

    def _wait_seconds(self, lane: Lane, ahead: int) -> int:
        """About how long `ahead` messages of `lane` take with this replica's workers."""
        threads = self.capacity.workers if lane == "command" else self.capacity.model_concurrency
        return max(1, math.ceil((ahead // threads + 1) * self._turn_seconds[lane]))

    def _note_wait(self, message: M, lane: Lane, ahead: int) -> None:
        """Say "queued, N ahead of you" for a model turn that will wait long. Not for a command: its
        wait is the CPU's, and a note costs about what the answer does (a burst would double)."""
        seconds = self._wait_seconds(lane, ahead)
        if lane == "chat" and ahead and seconds > self.capacity.queued_note_seconds:
            self._tell(message, "queued", ahead=ahead, seconds=seconds, note=True)

    def _tell(self, message: M, key: str, *, note: bool = False, **values: object) -> None:
        """A short reply in the sender's language, sent off the request: a note, or the message's answer."""

        def send() -> None:
            text = say(TOLD, key, self.deps.lang(message.text, message.conversation), **values)
            if note:
                self.deps.notify(message.conversation, Progress(text, None))
            else:
                self.answer(message, text)

        with contextlib.suppress(RuntimeError):  # stopping: the short reply is dropped
            self._told.submit(self._logged, send)

    def _logged(self, send: Callable[[], None]) -> None:
        try:
            send()
        except Exception:
            self.log.exception("%s short reply failed", self.name)

    # ---- workers -------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the command workers, the model pool and the feeder once."""
        with self._lock:
            if self._threads or self._stopping.is_set():
                return
            pools: list[tuple[str, Callable[[], None], int]] = [
                ("worker", lambda: self._work("command"), self.capacity.workers),
                ("model", lambda: self._work("chat"), self.capacity.model_concurrency),
                ("feeder", self._feed, 1),
            ]
            for kind, target, count in pools:
                for i in range(count):
                    t = threading.Thread(target=target, name=f"{self.name}-{kind}-{i}", daemon=True)
                    t.start()
                    self._threads.append(t)

    def _work(self, lane: Lane) -> None:
        metrics = self.deps.metrics
        while not self._stopping.is_set():
            w = self.lanes.take(lane, timeout=0.5)
            if w is None:
                continue
            started = time.monotonic()
            metrics.wait.labels(self.name, lane).observe(started - w.since)
            metrics.queue.labels(f"{self.name}_{lane}").set(self.lanes.depth(lane))
            metrics.in_flight.labels(self.name).set(self.lanes.in_flight())
            try:
                with self._chat_cpu.taken() if lane == "chat" else contextlib.nullcontext():
                    message = self.inbox.claim(w.key, self.deps.holder, self.deps.clock(), self.lease)
                    if message is not None:
                        self.handle(message)
                        self.inbox.done(w.key, self.deps.clock())
            except Exception:
                self.log.exception("%s worker failed", self.name, extra={"key": w.key})
            finally:
                self.lanes.done(w)
                took = time.monotonic() - started
                self._turn_seconds[lane] = 0.8 * self._turn_seconds[lane] + 0.2 * took
                metrics.in_flight.labels(self.name).set(self.lanes.in_flight())
                self._pull.set()  # room: the feeder looks in the inbox if anything may wait there

    def _feed(self) -> None:
        """Pull what waits in the inbox as soon as there is room (woken by workers; every `pull_seconds`)."""
        while not self._stopping.is_set():
            woken = self._pull.wait(self.capacity.pull_seconds)
            self._pull.clear()
            if self._stopping.is_set():
                break
            with self._lock:
                lanes = tuple(self._spilled) if woken else LANES
            if not lanes:
                continue  # a worker freed and nothing of ours waits: the periodic look covers the rest
            try:
                self._take_waiting(lanes)
            except Exception:
                self.log.exception("%s feeder failed", self.name)

    def _mark_spilled(self, lane: Lane) -> None:
        with self._lock:
            self._spilled.add(lane)

    def _take_waiting(self, lanes: tuple[Lane, ...] = LANES) -> int:
        """Claim, lane by lane, up to its room of queued messages nobody holds, and offer them; how many.

        Only what a lane has room for is claimed: a full command lane beside an empty chat lane must not
        claim commands only to release them again (that churn kept the feeder and the database busy).
        """
        count = 0
        for lane in lanes:
            with self._lock:
                self._spilled.discard(lane)
            room = self.lanes.room(lane)
            taken = (
                self.inbox.reclaim(self.deps.holder, self.deps.clock(), self.lease, limit=room, lane=lane)
                if room > 0
                else []
            )
            for message in taken:
                self._offer(message, self.lane_of(message))
            if room <= 0 or len(taken) == room:
                self._mark_spilled(lane)  # full, or there may be more: look again when a worker frees
            count += len(taken)
        return count

    def handle(self, message: M) -> None:
        """Run one message through the session and send the answer (its conversation's one turn)."""
        started = time.monotonic()
        metrics = self.deps.metrics
        kind = "command" if message.text.lstrip().startswith("/") else "chat"
        metrics.messages.labels(message.channel, kind).inc()
        try:
            if not message.text.strip():
                reply = "I can only read text messages. Try /help."
            else:
                inbound = Inbound(message.user, message.conversation, message.text, channel=self.name)
                try:
                    reply = self.reply(inbound)
                except Exception:
                    self.log.exception("%s message failed", self.name, extra={"key": message.dedupe_key})
                    reply = "Sorry, handling your message failed; the error is logged."
            with waiting():  # the channel's API
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
        self.start()
        self._take_waiting()
        self.deps.metrics.queue.labels(f"{self.name}_inbox").set(self.inbox.queued())

    def stop(self, grace: float = 20.0) -> None:
        """Stop taking messages, wait up to `grace` s for those being handled, hand the rest over."""
        self._stopping.set()
        self.lanes.close()
        self._pull.set()
        self._told.shutdown(wait=False)
        deadline = time.monotonic() + grace
        for t in self._threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        handed = self.inbox.release(self.deps.holder)
        if handed:
            self.log.info("%s: %d queued message(s) handed to other replicas", self.name, handed)
