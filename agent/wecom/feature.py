"""WeCom chat gateway: callbacks in, answers out, through the one Session every channel uses.

A verified callback is recorded in the shared inbox (durable MsgId de-duplication) and queued for
a bounded pool of worker threads, so the HTTP answer goes back at once; a worker claims the message
(exactly one replica does), runs `session.handle` and answers through the app message API
(markdown, split at 2,048 bytes) or, for the AI bot, the message's stream (response_url as the
fallback). Late results (another user's /approve, a resumed task, an expired confirmation, a DS
run that ended) reach the conversation through `deps.senders`; progress notes (`deps.Progress`)
are throttled per task, final messages never are.

In websocket mode (`aibot.mode: websocket`) the AI bot's messages arrive over the long connection
(`integrations/wecom/longconn.py`, started and stopped by `startup`/`shutdown`, held by one replica
under a lease) into the same inbox and workers; answers are `aibot_respond_msg` stream frames and
late results `aibot_send_msg`.

Identity is the verified FromUserName (or the AI bot's from.userid); the gate decides what an
unknown user may do.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from starlette.concurrency import run_in_threadpool
from starlette.routing import BaseRoute

from xihe.agent.deps import Deps, Notify, Progress
from xihe.agent.errors import ConfigErrors, WeComError
from xihe.agent.feature import Context, Feature, Installed, Job, Runtime, Section
from xihe.agent.loop import Hooks
from xihe.agent.session import Inbound, Session
from xihe.config.wecom import AibotSettings, WeComConfig, WeComSettings, resolve_settings
from xihe.integrations.wecom.aibot import ResponseUrlClient
from xihe.integrations.wecom.app_client import AppClient, TokenCache
from xihe.integrations.wecom.inbound import CHANNEL_AIBOT, CHANNEL_APP, InboundMessage, Rejected
from xihe.integrations.wecom.longconn import Intake, LongConnection, PushingStreams, send_msg_frame
from xihe.integrations.wecom.routes import wecom_routes
from xihe.integrations.wecom.store import SqlMsgIdStore, SqlStreamRegistry

if TYPE_CHECKING:
    from xihe.agent.tasks import Task

log = logging.getLogger("xihe.wecom")

APP_PREFIX = "wecom:app:"
AIBOT_PREFIX = "wecom:aibot:"
RESPONSE_URL_TTL = timedelta(hours=1)  # WeCom: a response_url may be used once within an hour


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


class Gateway:
    """The WeCom channel of one replica: inbox, worker pool, app client, streams and senders."""

    def __init__(
        self, deps: Deps, session: Callable[[], Session], settings: WeComSettings, cfg: WeComConfig
    ) -> None:
        self.session = session  # the bot's Session (built after the features are installed)
        self.deps = deps
        self.settings = settings
        self.cfg = cfg
        self.inbox = SqlMsgIdStore(deps.engine)
        ttl = settings.aibot.stream_ttl_seconds if settings.aibot else 360
        self.streams = SqlStreamRegistry(deps.engine, timedelta(seconds=ttl))
        self.client: AppClient | None = None
        if settings.app_enabled and settings.secret and settings.agent_id is not None:
            self.client = AppClient(
                settings.corp_id,
                settings.secret,
                settings.agent_id,
                api_base=settings.api_base,
                tokens=TokenCache(deps.clock),
                timeout=settings.http_timeout_seconds,
            )
        prefix = settings.aibot.response_url_prefix if settings.aibot else ""
        self.responder = ResponseUrlClient(prefix, timeout=settings.http_timeout_seconds) if prefix else None
        self.throttle = ProgressThrottle(settings.progress_interval_seconds, deps.clock)
        self.queue: queue.Queue[str] = queue.Queue(maxsize=settings.queue_size)
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._conv_locks: dict[str, threading.Lock] = {}
        self.busy = 0  # messages being handled right now in this replica
        # AI-bot answers that found no open stream and no response_url (the long connection sets it)
        self.aibot_fallback: Callable[[str, str], None] | None = None

    @property
    def lease(self) -> timedelta:
        """How long a queued message stays ours before another replica may take it."""
        return timedelta(seconds=self.deps.settings.core.store.lease_seconds)

    # ---- intake (runs in the request: must be quick) -------------------------------------------

    async def dispatch(self, message: InboundMessage) -> None:
        """The routes' dispatch: the database writes run off the event loop, so other requests go on."""
        await run_in_threadpool(self.accept, message)

    def accept(self, message: InboundMessage) -> None:
        """Record the message as queued for this replica and wake a worker; never does the work itself."""
        now = self.deps.clock()
        if message.channel == CHANNEL_AIBOT and message.stream_id:
            self.streams.attach(message.stream_id, message.conversation, message.response_url)
        self.inbox.enqueue(message, self.deps.holder, now, self.lease)
        self._offer(message.dedupe_key)

    def _offer(self, key: str) -> None:
        self.start()
        try:
            self.queue.put_nowait(key)
        except queue.Full:
            # the message is safe in the inbox; any replica's reclaim job takes it once it has room
            self.inbox.release_one(key, self.deps.clock())
            log.warning("wecom queue full; message left in the inbox", extra={"key": key})
        self.deps.metrics.queue.labels("wecom_memory").set(self.queue.qsize())

    def on_reject(self, path: str, outcome: Rejected) -> None:
        """Count refused callbacks (their reason is already logged by the routes)."""
        channel = CHANNEL_AIBOT if path.endswith("aibot") else CHANNEL_APP
        self.deps.metrics.messages.labels(channel, f"rejected_{outcome.status}").inc()

    # ---- workers -------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the worker threads once."""
        with self._lock:
            if self._threads or self._stopping.is_set():
                return
            for i in range(self.settings.workers):
                t = threading.Thread(target=self._work, name=f"wecom-worker-{i}", daemon=True)
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
                message = self.inbox.claim(key, self.deps.holder, self.deps.clock())
                if message is not None:
                    self.handle(message)
                    self.inbox.done(key, self.deps.clock())
            except Exception:
                log.exception("wecom worker failed", extra={"key": key})

    def _conversation_lock(self, conversation: str) -> threading.Lock:
        with self._lock:
            return self._conv_locks.setdefault(conversation, threading.Lock())

    def handle(self, message: InboundMessage) -> None:
        """Run one message through the session and send the answer (one conversation at a time)."""
        started = time.monotonic()
        metrics = self.deps.metrics
        kind = "command" if message.text.lstrip().startswith("/") else "chat"
        metrics.messages.labels(message.channel, kind).inc()
        with self._lock:
            self.busy += 1
        try:
            with self._conversation_lock(message.conversation):
                if not message.text.strip():
                    reply = "I can only read text messages. Try /help."
                else:
                    try:
                        reply = self.session().handle(
                            Inbound(
                                user=message.user,
                                conversation=message.conversation,
                                text=message.text,
                                channel="wecom",
                            )
                        )
                    except Exception:
                        log.exception("wecom message failed", extra={"key": message.dedupe_key})
                        reply = "Sorry, handling your message failed; the error is logged."
                self.answer(message, reply)
        finally:
            with self._lock:
                self.busy -= 1
            elapsed = time.monotonic() - started
            metrics.latency.labels(message.channel).observe(elapsed)
            recent = self.deps.tasks.recent(conversation=message.conversation, limit=1)
            log.info(
                "wecom message handled",
                extra={
                    "key": message.dedupe_key,
                    "user": message.user,
                    "channel": message.channel,
                    "task_id": recent[0].id if recent else None,
                    "seconds": round(elapsed, 3),
                },
            )

    def answer(self, message: InboundMessage, text: str) -> None:
        """The reply to `message`: app markdown, or the message's stream (response_url when it is gone)."""
        if message.channel == CHANNEL_APP:
            self._send_app(message.user, text)
            return
        if message.stream_id and self.streams.update(message.stream_id, text, self.deps.clock(), finish=True):
            return
        if not self._send_response_url(message.conversation, text) and self.aibot_fallback is not None:
            self.aibot_fallback(message.conversation, text)

    # ---- senders (late results and progress) ---------------------------------------------------

    def _throttled(self, conversation: str, text: str) -> bool:
        if isinstance(text, Progress) and not self.throttle.allow(conversation, text.task_id):
            self.deps.metrics.messages.labels("wecom", "progress_dropped").inc()
            return True
        return False

    def send_app(self, conversation: str, text: str) -> None:
        """deps.senders['wecom:app:']: conversation `wecom:app:<agent>:<user>`."""
        if self._throttled(conversation, text):
            return
        user = conversation[len(APP_PREFIX) :].split(":", 1)[-1]
        self._send_app(user, str(text))

    def _send_app(self, user: str, text: str) -> None:
        if self.client is None:
            log.error("wecom app replies need secret_env and agent_id; reply dropped", extra={"user": user})
            return
        try:
            self.client.send_markdown(user, text)
        except WeComError as exc:
            log.error("wecom send failed: %s", exc, extra={"user": user})
            self.deps.metrics.messages.labels("wecom_app", "send_failed").inc()
            return
        self.deps.metrics.messages.labels("wecom_app", "sent").inc()

    def send_aibot(self, conversation: str, text: str) -> None:
        """deps.senders['wecom:aibot:']: progress into the open stream; other texts via response_url."""
        if self._throttled(conversation, text):
            return
        now = self.deps.clock()
        if isinstance(text, Progress):
            stream = self.streams.open_for(conversation, now)
            if stream is not None:
                self.streams.update(stream.id, f"{stream.content}\n\n{text}".strip(), now)
            return
        if self._send_response_url(conversation, str(text)):
            return
        stream = self.streams.open_for(conversation, now)
        if stream is not None and self.streams.update(stream.id, f"{stream.content}\n\n{text}".strip(), now):
            return
        log.warning("no way to reach %s (no open stream, no unused response_url)", conversation)
        self.deps.metrics.messages.labels("wecom_aibot", "undeliverable").inc()

    def _send_response_url(self, conversation: str, text: str) -> bool:
        url = self.streams.take_response_url(conversation, self.deps.clock(), RESPONSE_URL_TTL)
        if url is None or self.responder is None:
            return False
        try:
            self.responder.send_markdown(url, text)
        except WeComError as exc:
            log.error("wecom response_url failed: %s", exc, extra={"conversation": conversation})
            return False
        self.deps.metrics.messages.labels("wecom_aibot", "sent").inc()
        return True

    def on_step(self, task: Task, step_key: str, tool: str) -> None:
        """Agent step listener: a WeCom task that runs for a while says which step it is on."""
        if not task.conversation.startswith(("wecom:",)):
            return
        if self.deps.clock() - task.created_at < self.throttle.interval:
            return  # quick tasks just answer
        try:
            self.deps.notify(task.conversation, Progress(f"⏳ task {task.id}: running `{tool}`…", task.id))
        except Exception:
            log.exception("progress message failed", extra={"task_id": task.id})

    # ---- background ----------------------------------------------------------------------------

    def reclaim(self) -> None:
        """Take over queued messages of replicas that died (their lease lapsed)."""
        room = self.queue.maxsize - self.queue.qsize()
        if room > 0:
            for key in self.inbox.reclaim(self.deps.holder, self.deps.clock(), self.lease, limit=room):
                self._offer(key)
        self.deps.metrics.queue.labels("wecom_inbox").set(self.inbox.queued())

    def stop(self, grace: float = 20.0) -> None:
        """Stop taking messages, wait up to `grace` s for those being handled, hand the rest over."""
        self._stopping.set()
        deadline = time.monotonic() + grace
        for t in self._threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        handed = self.inbox.release(self.deps.holder, self.deps.clock())
        if handed:
            log.info("wecom: %d queued message(s) handed to other replicas", handed)


# ---- the feature interface -----------------------------------------------------------------------


@dataclass
class WeCom:
    """The channel of one app: the gateway, and the long connection in websocket mode."""

    gateway: Gateway
    conn: LongConnection | None = None


def channel(app: Runtime) -> WeCom | None:
    """This app's WeCom channel, or None when it is off."""
    found = app.state("wecom")
    return found if isinstance(found, WeCom) else None


def install(ctx: Context) -> Installed:
    """The gateway when wecom.yaml exists; missing secrets leave the channel off and /readyz not ready."""
    cfg = ctx.settings.section("wecom")
    if cfg is None or ctx.offline:
        return Installed()
    deps = ctx.deps
    try:
        settings = resolve_settings(cfg, os.environ, str(ctx.settings.directory / "wecom.yaml"))
    except ConfigErrors as exc:
        # the channel cannot work without its secrets: say so loudly, keep everything else serving,
        # and report not-ready (/readyz) so a load balancer sends WeCom's callbacks elsewhere
        log.error("WeCom is configured but cannot start: %s", exc)
        return Installed(problems={"wecom": str(exc).replace("\n", "; ")})
    for secret in (settings.token, settings.aes_key, settings.secret):
        deps.redactor.add(secret)
    if settings.aibot is not None:
        deps.redactor.add(settings.aibot.token)
        deps.redactor.add(settings.aibot.aes_key)
    gateway = Gateway(deps, ctx.session, settings, cfg)
    wecom = WeCom(gateway)
    senders: dict[str, Notify] = {APP_PREFIX: gateway.send_app, AIBOT_PREFIX: gateway.send_aibot}
    if settings.aibot is not None and settings.aibot.long_connection is not None:
        wecom.conn, senders[AIBOT_PREFIX] = _long_connection(deps, gateway, settings.aibot)
    every = max(1.0, ctx.settings.core.store.lease_seconds / 2)
    return Installed(
        senders=senders,
        hooks=Hooks(step_listeners=(gateway.on_step,)),
        # reclaim queued messages of dead replicas, at half the lease
        jobs=[Job("wecom_reclaim", reclaim, every)],
        routes=[routes],
        startup=[startup],
        shutdown=[shutdown],
        state=wecom,
    )


FEATURE = Feature("wecom", Section("wecom.yaml", "wecom", WeComConfig), install)


def _long_connection(deps: Deps, gateway: Gateway, bot: AibotSettings) -> tuple[LongConnection, Notify]:
    """AI bot over the long connection: pushed messages enter the same inbox and worker path; returns
    the connection and the sender of late results."""
    assert bot.long_connection is not None
    deps.redactor.add(bot.long_connection.secret)
    conn = LongConnection(bot.long_connection, deps.engine, holder=deps.holder, clock=deps.clock)
    streams = PushingStreams(deps.engine, timedelta(seconds=bot.stream_ttl_seconds), conn.deliver)
    gateway.streams = streams

    def count(outcome: str) -> None:
        deps.metrics.messages.labels("wecom_aibot_ws", outcome).inc()

    conn.on_frame = Intake(
        gateway.inbox,
        streams,
        gateway.accept,
        conn.deliver,
        deps.clock,
        ack_text=bot.ack_text,
        welcome_text=bot.welcome_text,
        count=count,
    ).on_frame

    def send_late(conversation: str, text: str) -> None:
        """Progress goes into the open stream; anything else is a proactive aibot_send_msg."""
        if isinstance(text, Progress):
            gateway.send_aibot(conversation, text)
            return
        conn.deliver(send_msg_frame(conversation.rsplit(":", 1)[-1], str(text)))
        count("sent")

    gateway.aibot_fallback = send_late
    return conn, send_late


def routes(app: Runtime) -> list[BaseRoute]:
    """/wecom/callback and /wecom/aibot (as configured; none when the channel could not start)."""
    wecom = channel(app)
    if wecom is None:
        return []
    gateway = wecom.gateway
    settings = gateway.settings
    if settings.aibot is not None and not settings.aibot.callbacks:
        settings = dataclasses.replace(settings, aibot=None)  # websocket mode: no /wecom/aibot
    return list(
        wecom_routes(
            settings,
            gateway.inbox,
            gateway.dispatch,
            app.deps.clock,
            streams=gateway.streams,
            on_reject=gateway.on_reject,
        )
    )


def reclaim(app: Runtime) -> None:
    """Job: see Gateway.reclaim."""
    wecom = channel(app)
    if wecom is not None:
        wecom.gateway.reclaim()


def startup(app: Runtime) -> None:
    """Server lifespan start: open the AI bot's long connection (in websocket mode)."""
    wecom = channel(app)
    if wecom is not None and wecom.conn is not None:
        wecom.conn.start()


def shutdown(app: Runtime) -> None:
    """Server lifespan end: stop the workers and hand queued messages over, then the connection."""
    wecom = channel(app)
    if wecom is None:
        return
    wecom.gateway.stop()
    if wecom.conn is not None:
        wecom.conn.stop()
