"""Starlette routes for WeCom callbacks: `/wecom/callback` (self-built app) and `/wecom/aibot` (AI bot).

A POST is verified, decrypted and de-duplicated in a worker thread (so a flood of bad requests
does not stall the event loop), handed to `dispatch`, and acknowledged at once with an empty 200;
`dispatch` must only enqueue (the channel runs the work in the background). A rejection answers its
status and reason and dispatches nothing. An AI-bot card click is the exception to "at once": its
answer is the card's update (WeCom's only way to update an AI-bot card), given by `card_reply`
within WeCom's 5 s.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from xihe.agent.clock import Clock
from xihe.config.wecom import WeComSettings
from xihe.integrations.wecom.aibot import AibotCallback, BotReply, StreamRegistry, Streams, encrypt_reply
from xihe.integrations.wecom.callback import AppCallback
from xihe.integrations.wecom.crypto import MsgCrypto
from xihe.integrations.wecom.inbound import Accepted, Duplicate, Echo, InboundMessage, MsgIdStore, Rejected

log = logging.getLogger("xihe.wecom")

Dispatch = Callable[[InboundMessage], Any]
# the AI bot's answer to a card click (task_id, the new click or None for a repeat delivery): the
# passive `update_template_card` body, or None for no change; it must come back within WeCom's 5 s
CardReply = Callable[[str, "InboundMessage | None"], "dict[str, Any] | None"]
OnReject = Callable[[str, Rejected], None]


async def read_capped(request: Request, cap: int) -> bytes | Rejected:
    """Read the body, refusing (413) as soon as it is known to exceed `cap` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > cap:
        return Rejected(413, f"body is larger than {cap} bytes")
    buf = bytearray()
    async for chunk in request.stream():
        buf += chunk
        if len(buf) > cap:
            return Rejected(413, f"body is larger than {cap} bytes")
    return bytes(buf)


def _query(request: Request) -> Mapping[str, str]:
    # Starlette has already URL-decoded the parameters, as WeCom requires
    return dict(request.query_params)


def _rejected(path: str, outcome: Rejected, on_reject: OnReject | None) -> Response:
    log.info(
        "wecom callback rejected", extra={"path": path, "status": outcome.status, "reason": outcome.reason}
    )
    if on_reject is not None:
        on_reject(path, outcome)
    return PlainTextResponse(outcome.reason, status_code=outcome.status)


async def _dispatch(dispatch: Dispatch, message: InboundMessage) -> None:
    result = dispatch(message)
    if inspect.isawaitable(result):
        await result


def wecom_routes(
    settings: WeComSettings,
    msgid_store: MsgIdStore,
    dispatch: Dispatch,
    clock: Clock,
    *,
    streams: Streams | None = None,
    on_reject: OnReject | None = None,
    card_reply: CardReply | None = None,
) -> list[Route]:
    """The callback routes enabled in `settings`; `dispatch(InboundMessage)` receives each new message."""
    routes: list[Route] = []

    if settings.app_enabled:
        app = AppCallback(
            MsgCrypto.create(settings.token, settings.aes_key, settings.corp_id),
            msgid_store,
            window_seconds=settings.timestamp_window_seconds,
            max_body_bytes=settings.max_body_bytes,
            agent_id=settings.agent_id,
        )

        async def app_verify(request: Request) -> Response:
            outcome = app.verify(_query(request), clock())
            if isinstance(outcome, Rejected):
                return _rejected("/wecom/callback", outcome, on_reject)
            return PlainTextResponse(outcome.text)

        async def app_post(request: Request) -> Response:
            body = await read_capped(request, settings.max_body_bytes)
            if isinstance(body, Rejected):
                return _rejected("/wecom/callback", body, on_reject)
            outcome = await run_in_threadpool(
                app.receive, _query(request), body, request.headers.get("content-type", ""), clock()
            )
            if isinstance(outcome, Rejected):
                return _rejected("/wecom/callback", outcome, on_reject)
            if isinstance(outcome, Duplicate):
                # a WeCom retry or a replay: 200 so WeCom stops retrying, and no work
                log.info("wecom duplicate callback", extra={"key": outcome.key})
                return Response(status_code=200)
            assert isinstance(outcome, Accepted)
            try:
                await _dispatch(dispatch, outcome.message)
            except Exception:
                # let WeCom's retry deliver it again instead of losing it
                msgid_store.forget(outcome.message.dedupe_key)
                log.exception("wecom dispatch failed", extra={"key": outcome.message.dedupe_key})
                return PlainTextResponse("dispatch failed", status_code=500)
            return Response(status_code=200)

        routes += [
            Route("/wecom/callback", app_verify, methods=["GET"]),
            Route("/wecom/callback", app_post, methods=["POST"]),
        ]

    if settings.aibot is not None:
        bot_settings = settings.aibot
        bot_crypto = MsgCrypto.create(bot_settings.token, bot_settings.aes_key, "")
        registry: Streams = (
            streams
            if streams is not None
            else StreamRegistry(timedelta(seconds=bot_settings.stream_ttl_seconds))
        )
        bot = AibotCallback(
            bot_crypto,
            msgid_store,
            registry,
            window_seconds=settings.timestamp_window_seconds,
            max_body_bytes=settings.max_body_bytes,
            ack_text=bot_settings.ack_text,
            welcome_text=bot_settings.welcome_text,
        )

        async def bot_verify(request: Request) -> Response:
            outcome = bot.verify(_query(request), clock())
            if isinstance(outcome, Rejected):
                return _rejected("/wecom/aibot", outcome, on_reject)
            assert isinstance(outcome, Echo)
            return PlainTextResponse(outcome.text)

        async def bot_post(request: Request) -> Response:
            body = await read_capped(request, settings.max_body_bytes)
            if isinstance(body, Rejected):
                return _rejected("/wecom/aibot", body, on_reject)
            query = _query(request)
            now = clock()
            outcome = await run_in_threadpool(
                bot.receive, query, body, request.headers.get("content-type", ""), now
            )
            if isinstance(outcome, Rejected):
                return _rejected("/wecom/aibot", outcome, on_reject)
            assert isinstance(outcome, BotReply)
            if outcome.message is not None:
                try:
                    await _dispatch(dispatch, outcome.message)
                except Exception:
                    msgid_store.forget(outcome.message.dedupe_key)
                    log.exception("wecom aibot dispatch failed", extra={"key": outcome.message.dedupe_key})
                    return PlainTextResponse("dispatch failed", status_code=500)
            if outcome.card_task and card_reply is not None:
                update = await run_in_threadpool(card_reply, outcome.card_task, outcome.message)
                if update is not None:
                    return JSONResponse(encrypt_reply(bot_crypto, update, query["nonce"], clock()))
            if outcome.reply is None:
                return Response(status_code=200)
            return JSONResponse(encrypt_reply(bot_crypto, outcome.reply, query["nonce"], now))

        routes += [
            Route("/wecom/aibot", bot_verify, methods=["GET"]),
            Route("/wecom/aibot", bot_post, methods=["POST"]),
        ]

    return routes
