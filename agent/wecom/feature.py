"""WeCom chat gateway: callbacks in, answers out, through the one Session every channel uses.

The Gateway is WeCom's `xihe.agent.channels.Channel`: a verified callback is recorded in the shared
inbox (durable MsgId de-duplication) and queued for the channel's worker pool, so the HTTP answer
goes back at once; a worker claims the message (exactly one replica does), runs `session.handle`
and the Gateway answers through the app message API (markdown, split at 2,048 bytes) or, for the AI
bot, the message's stream (response_url as the fallback). Late results (another user's /approve, a resumed task, an expired confirmation, a DS
run that ended) reach the conversation through `deps.senders`; progress notes (`deps.Progress`)
are throttled per task, final messages never are.

In websocket mode (`aibot.mode: websocket`) the AI bot's messages arrive over the long connection
(`integrations/wecom/longconn.py`, started and stopped by `startup`/`shutdown`, held by one replica
under a lease) into the same inbox and workers; answers are `aibot_respond_msg` stream frames and
late results `aibot_send_msg`.

Action cards: the app's (`xihe.agent.wecom.cards`) are updated in place through the update API; the
AI bot's (`xihe.agent.wecom.bot_cards`) only by the answer to a click, which `card_reply` gives
within WeCom's 5 s (HTTP answer, or `aibot_respond_update_msg` over the long connection) once the
click, run as its typed command by a worker, is handled.

Identity is the verified FromUserName (or the AI bot's from.userid); the gate decides what an
unknown user may do. Every text leaves through `wecom_markdown.reply`: whoever wrote a reply (xihe,
the model, a tool's output quoted in it), WeCom gets no link, image, mention, colour or tag from it.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import anyio
from starlette.routing import BaseRoute

from xihe.agent.channels import Capacity, Channel
from xihe.agent.deps import Deps, Notify, Progress
from xihe.agent.errors import ConfigErrors, WeComError
from xihe.agent.feature import Context, Feature, Installed, Job, Runtime, StateKey
from xihe.agent.hooks import Hooks
from xihe.agent.lanes import LANES
from xihe.agent.session import Session
from xihe.agent.wecom.bot_cards import BotCards
from xihe.agent.wecom.cards import ActionCards
from xihe.agent.wecom_markdown import reply
from xihe.config.wecom import WECOM_SECTION, AibotSettings, WeComConfig, WeComSettings, resolve_settings
from xihe.integrations.wecom.aibot import ResponseUrlClient
from xihe.integrations.wecom.app_client import AppClient, TokenCache
from xihe.integrations.wecom.inbound import CHANNEL_AIBOT, CHANNEL_APP, InboundMessage, Rejected
from xihe.integrations.wecom.longconn import LongConnection
from xihe.integrations.wecom.routes import wecom_routes
from xihe.integrations.wecom.store import SqlMsgIdStore, SqlStreamRegistry
from xihe.integrations.wecom.ws_frames import send_card_frame, send_msg_frame, update_card_frame
from xihe.integrations.wecom.ws_intake import Intake
from xihe.integrations.wecom.ws_streams import PushingStreams

log = logging.getLogger("xihe.wecom")

APP_PREFIX = "wecom:app:"
AIBOT_PREFIX = "wecom:aibot:"
RESPONSE_URL_TTL = timedelta(hours=1)  # WeCom: a response_url may be used once within an hour
# how long the answer to an AI-bot card click waits for the click to be handled before it draws the
# card as it stands: WeCom drops an answer later than 5 s after the event
CARD_REPLY_SECONDS = 3.0


class Gateway(Channel[InboundMessage]):
    """The WeCom channel of one replica: the shared inbox and workers, app client, streams and senders."""

    def __init__(
        self, deps: Deps, session: Callable[[], Session], settings: WeComSettings, cfg: WeComConfig
    ) -> None:
        super().__init__(
            "wecom",
            deps,
            SqlMsgIdStore(deps.engine),
            lambda inbound: session().handle(inbound),  # the bot's Session is built after the features
            capacity=Capacity(
                workers=settings.workers,
                model_concurrency=settings.model_concurrency,
                model_cpu_threads=settings.model_cpu_threads,
                intake_threads=settings.intake_threads,
                queue_size=settings.queue_size,
                max_waiting=settings.max_waiting,
                user_messages_per_minute=settings.user_messages_per_minute,
                messages_per_second=settings.messages_per_second,
                burst_messages=settings.burst_messages,
                queued_note_seconds=settings.queued_note_seconds,
            ),
            progress_interval=settings.progress_interval_seconds,
        )
        self.settings = settings
        self.cfg = cfg
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
        # AI-bot answers that found no open stream and no response_url (the long connection sets it)
        self.aibot_fallback: Callable[[str, str], None] | None = None
        # the app's action cards (Confirm/Cancel, Approve/Reject); none without the app client
        self.cards = (
            ActionCards(deps, self.client, lambda: session().agent.registry)
            if self.client is not None
            else None
        )
        self._click_replies: dict[str, str] = {}
        # the AI bot's action cards; sent over the long connection (`bot_deliver`) or a 1:1 response_url
        self.bot_deliver: Callable[[dict[str, Any]], None] | None = None
        self.bot_cards = (
            BotCards(deps, lambda: session().agent.registry, self._send_bot_card) if settings.aibot else None
        )
        self._clicks_done: dict[str, threading.Event] = {}  # AI-bot clicks being handled, by dedupe key
        # per lane, so a command's callback never queues behind a burst of questions' callbacks
        self._intake = {lane: anyio.CapacityLimiter(self.capacity.intake_threads) for lane in LANES}

    # ---- intake (runs in the request: must be quick) -------------------------------------------

    async def dispatch(self, message: InboundMessage) -> None:
        """The routes' dispatch: the database writes run off the event loop, so other requests go on.

        A few callbacks per lane are recorded at once, the rest wait in arrival order: two hundred
        threads recording a burst at once share the interpreter so thinly that each takes most of a
        second, a command's included."""
        limiter = self._intake[self.lane_of(message)]
        await anyio.to_thread.run_sync(self.accept, message, limiter=limiter)

    def accept(self, message: InboundMessage) -> None:
        """An AI-bot message first binds its stream to the conversation; then it is queued."""
        if message.channel == CHANNEL_AIBOT and message.stream_id:
            self.streams.attach(message.stream_id, message.conversation, message.response_url)
        if message.channel == CHANNEL_AIBOT and message.card_task:
            self._clicks_done[message.dedupe_key] = threading.Event()
        super().accept(message)

    def on_reject(self, path: str, outcome: Rejected) -> None:
        """Count refused callbacks (their reason is already logged by the routes)."""
        channel = CHANNEL_AIBOT if path.endswith("aibot") else CHANNEL_APP
        self.deps.metrics.messages.labels(channel, f"rejected_{outcome.status}").inc()

    def handle(self, message: InboundMessage) -> None:
        """A card click runs as its typed command, then is audited and (app) every copy of the card
        updated; any other message may have moved an action on too (a typed /confirm), so app cards are
        refreshed. An AI-bot click's answer (the card's update) waits for this, see `card_reply`."""
        cards = self.bot_cards if message.channel == CHANNEL_AIBOT else self.cards
        before = cards.clicked(message) if cards is not None and message.card_task else None
        try:
            super().handle(message)
            if cards is not None and message.card_task:
                cards.after_click(message, before, self._click_replies.pop(message.dedupe_key, ""))
            elif self.cards is not None:
                self.cards.refresh()
        finally:
            done = self._clicks_done.pop(message.dedupe_key, None)
            if done is not None:
                done.set()

    def card_reply(self, task_id: str, message: InboundMessage | None) -> dict[str, Any] | None:
        """The answer to an AI-bot card click: once the click was handled (or after CARD_REPLY_SECONDS),
        the clicked card as its action stands; a repeated delivery (`message` None) gets it at once."""
        if self.bot_cards is None:
            return None
        done = self._clicks_done.get(message.dedupe_key) if message is not None else None
        if done is not None and not done.wait(CARD_REPLY_SECONDS):
            log.warning(
                "card click not handled within %s s; answering with the card as it stands", CARD_REPLY_SECONDS
            )
        if message is not None:  # handled later or elsewhere (a reclaim): nobody waits for it any more
            self._clicks_done.pop(message.dedupe_key, None)
        return self.bot_cards.reply_for(task_id)

    def ws_card_click(self, task_id: str, message: InboundMessage | None, req_id: str) -> None:
        """Long connection: answer the click pushed with `req_id` by `aibot_respond_update_msg`, off the
        connection's reader thread."""

        def answer() -> None:
            body = self.card_reply(task_id, message)
            if body is not None and self.bot_deliver is not None:
                self.bot_deliver(update_card_frame(req_id, body))

        threading.Thread(target=answer, name="wecom-card-reply", daemon=True).start()

    def _send_bot_card(self, conversation: str, chat: str, single: bool, card: dict[str, Any]) -> bool:
        """An AI-bot card into `chat`: proactive over the long connection; in callback mode only through
        a 1:1 conversation's unused response_url (WeCom takes a card there for single chats only)."""
        if self.bot_deliver is not None:
            self.bot_deliver(send_card_frame(chat, card))
            return True
        if self.responder is None or not single:
            return False
        url = self.streams.take_response_url(conversation, self.deps.clock(), RESPONSE_URL_TTL)
        if url is None:
            return False
        try:
            self.responder.send_card(url, card)
        except WeComError as exc:
            log.error("wecom bot card failed: %s", exc, extra={"conversation": conversation})
            return False
        return True

    def answer(self, message: InboundMessage, text: str) -> None:
        """The reply to `message`: app markdown, or the message's stream (response_url when it is gone)."""
        if message.card_task:
            self._click_replies[message.dedupe_key] = text
        if message.channel == CHANNEL_APP:
            self._send_app(message.user, text)
            return
        if message.card_task and message.response_url and self.responder is not None:
            try:  # a click has no stream: its own response_url carries the text
                self.responder.send_markdown(message.response_url, reply(text))
                return
            except WeComError as exc:
                log.error("wecom response_url failed: %s", exc, extra={"conversation": message.conversation})
        if message.stream_id and self.streams.update(
            message.stream_id, reply(text), self.deps.clock(), finish=True
        ):
            return
        if not self._send_response_url(message.conversation, text) and self.aibot_fallback is not None:
            self.aibot_fallback(message.conversation, text)

    # ---- senders (late results and progress) ---------------------------------------------------

    def send_app(self, conversation: str, text: str) -> None:
        """deps.senders['wecom:app:']: conversation `wecom:app:<agent>:<user>`."""
        if self.throttled(conversation, text):
            return
        user = conversation[len(APP_PREFIX) :].split(":", 1)[-1]
        self._send_app(user, str(text))

    def _send_app(self, user: str, text: str) -> None:
        if self.client is None:
            log.error("wecom app replies need secret_env and agent_id; reply dropped", extra={"user": user})
            return
        try:
            self.client.send_markdown(user, reply(text))
        except WeComError as exc:
            log.error("wecom send failed: %s", exc, extra={"user": user})
            self.deps.metrics.messages.labels("wecom_app", "send_failed").inc()
            return
        self.deps.metrics.messages.labels("wecom_app", "sent").inc()

    def send_aibot(self, conversation: str, text: str) -> None:
        """deps.senders['wecom:aibot:']: progress into the open stream; other texts via response_url."""
        if self.throttled(conversation, text):
            return
        now = self.deps.clock()
        if isinstance(text, Progress):
            stream = self.streams.open_for(conversation, now)
            if stream is not None:
                self.streams.update(stream.id, f"{stream.content}\n\n{reply(text)}".strip(), now)
            return
        if self._send_response_url(conversation, str(text)):
            return
        stream = self.streams.open_for(conversation, now)
        if stream is not None and self.streams.update(
            stream.id, f"{stream.content}\n\n{reply(text)}".strip(), now
        ):
            return
        log.warning("no way to reach %s (no open stream, no unused response_url)", conversation)
        self.deps.metrics.messages.labels("wecom_aibot", "undeliverable").inc()

    def _send_response_url(self, conversation: str, text: str) -> bool:
        url = self.streams.take_response_url(conversation, self.deps.clock(), RESPONSE_URL_TTL)
        if url is None or self.responder is None:
            return False
        try:
            self.responder.send_markdown(url, reply(text))
        except WeComError as exc:
            log.error("wecom response_url failed: %s", exc, extra={"conversation": conversation})
            return False
        self.deps.metrics.messages.labels("wecom_aibot", "sent").inc()
        return True


# ---- the feature interface -----------------------------------------------------------------------


@dataclass
class WeCom:
    """The channel of one app: the gateway, and the long connection in websocket mode."""

    gateway: Gateway
    conn: LongConnection | None = None


CHANNEL = StateKey("wecom", WeCom)  # this app's WeCom channel (None when it is off)


def install(ctx: Context) -> Installed:
    """The gateway when wecom.yaml exists; missing secrets leave the channel off and /readyz not ready."""
    cfg = ctx.settings.get(WECOM_SECTION)
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
        hooks=Hooks(
            step_listeners=(gateway.on_step,),
            pause_listeners=tuple(c.on_pause for c in (gateway.cards, gateway.bot_cards) if c is not None),
            # the AI bot's cards change only in the answer to a click: only the app's follow an expiry
            expiry_listeners=(gateway.cards.on_expired,) if gateway.cards is not None else (),
        ),
        # reclaim queued messages of dead replicas, at half the lease
        jobs=[Job("wecom_reclaim", reclaim, every)],
        routes=[routes],
        startup=[startup],
        shutdown=[shutdown],
        state=wecom,
    )


FEATURE = Feature("wecom", WECOM_SECTION, install)


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
        on_card_click=gateway.ws_card_click,
    ).on_frame
    gateway.bot_deliver = conn.deliver

    def send_late(conversation: str, text: str) -> None:
        """Progress goes into the open stream; anything else is a proactive aibot_send_msg."""
        if isinstance(text, Progress):
            gateway.send_aibot(conversation, text)
            return
        conn.deliver(send_msg_frame(conversation.rsplit(":", 1)[-1], reply(str(text))))
        count("sent")

    gateway.aibot_fallback = send_late
    return conn, send_late


def routes(app: Runtime) -> list[BaseRoute]:
    """/wecom/callback and /wecom/aibot (as configured; none when the channel could not start)."""
    wecom = app.get(CHANNEL)
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
            card_reply=gateway.card_reply,
        )
    )


def reclaim(app: Runtime) -> None:
    """Job: see Gateway.reclaim."""
    wecom = app.get(CHANNEL)
    if wecom is not None:
        wecom.gateway.reclaim()
        if wecom.gateway.cards is not None:
            wecom.gateway.cards.refresh()  # expiries and other late moves show on the cards


def startup(app: Runtime) -> None:
    """Server lifespan start: the workers and feeder (an idle replica takes others' overflow); the AI bot's
    long connection (in websocket mode)."""
    wecom = app.get(CHANNEL)
    if wecom is None:
        return
    wecom.gateway.start()
    if wecom.conn is not None:
        wecom.conn.start()


def shutdown(app: Runtime) -> None:
    """Server lifespan end: stop the workers and hand queued messages over, then the connection."""
    wecom = app.get(CHANNEL)
    if wecom is None:
        return
    wecom.gateway.stop()
    if wecom.conn is not None:
        wecom.conn.stop()
