"""send_wecom_alert: the model raises an alert to a configured WeCom robot channel. A write: the gate asks.

It never posts to the robot itself: the message is rendered into the alert outbox under a key
derived from the call's idempotency key (a resumed call finds its row instead of adding a second),
and the outbox sender delivers it like any pipeline alert (20/min per robot, retries, e-mail fallback,
every attempt audited). The channel argument is an enum of the channels in alerts.yaml.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model, field_validator

from xihe.agent.deps import AlertSink
from xihe.agent.errors import ToolFailed
from xihe.agent.i18n import Catalog, Lang, text
from xihe.agent.registry import ToolContext, ToolSpec

NAME = "send_wecom_alert"
FAILS: Catalog = {
    "not_configured": {"en": "alerts is not configured on this bot", "zh": "这个机器人没有配置告警"},
    "vanished": {"en": "outbox row {key} vanished", "zh": "发件箱里的记录 {key} 不见了"},
}
USERID = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")


def manual_key(ident: str, channel: str, mentions: tuple[str, ...]) -> str:
    """Outbox key of a model-raised message: one per tool call (its idempotency key)."""
    return f"manual:{ident}:{'P0' if mentions else 'P1'}:{channel}"


def _alerts(ctx: ToolContext) -> AlertSink:
    if ctx.deps.alerts is None:
        raise ToolFailed(text(FAILS, "not_configured"))
    return ctx.deps.alerts


class Args(BaseModel):
    """Arguments; `make_spec` narrows `channel` to the configured channel names."""

    channel: str = Field(description="alert channel (a WeCom group robot) from alerts.yaml")
    title: str = Field(min_length=1, max_length=120, description="one-line title, e.g. 'order_sync late'")
    markdown: str = Field(
        min_length=1,
        max_length=20000,
        description="message body in WeCom markdown (headings, **bold**, > quotes, `code`); links, "
        "mentions and colours in it show as plain text; cut to 4096 bytes",
    )
    mentions: list[str] = Field(
        default_factory=list,
        max_length=20,
        description="WeCom user ids to @mention (pages them), e.g. ['zhangsan']; empty for none",
    )

    @field_validator("mentions")
    @classmethod
    def _userids(cls, value: list[str]) -> list[str]:
        bad = [m for m in value if not USERID.match(m)]
        if bad:
            raise ValueError(f"not WeCom user ids: {', '.join(bad)}")
        return value


def _key(args: Any, ctx: ToolContext) -> str:
    return manual_key(ctx.idempotency_key, args.channel, tuple(args.mentions))


def _result(key: str, ctx: ToolContext) -> dict[str, Any]:
    row = _alerts(ctx).outbox.get(key)
    if row is None:
        raise ToolFailed(text(FAILS, "vanished", key=key))
    status = f"sent via {row.sent_via}" if row.status == "sent" else "queued for the outbox sender"
    return {"outbox_key": key, "channel": row.channel, "status": status}


def run(args: Any, ctx: ToolContext) -> dict[str, Any]:
    """Render the message into the outbox; the sender job delivers it."""
    service = _alerts(ctx)
    try:
        key, _added = service.raise_alert(
            _key(args, ctx), args.channel, args.title, args.markdown, args.mentions, ctx.user
        )
    except ValueError as exc:
        raise ToolFailed(str(exc)) from exc
    return _result(key, ctx)


def lookup(args: Any, ctx: ToolContext) -> dict[str, Any] | None:
    """After a crash: the row this call already queued, if any."""
    if _alerts(ctx).outbox.get(_key(args, ctx)) is None:
        return None
    return _result(_key(args, ctx), ctx)


def summarize(result: Any, lang: Lang = "en") -> str:
    """How an explicit command shows the result (the outbox key and status read the same in zh and en)."""
    return f"Alert {result['outbox_key']}: {result['status']}."


def make_spec(channels: list[str]) -> ToolSpec:
    """The tool with `channel` limited to `channels` (the schema the model sees lists them)."""
    choices = tuple(channels) or ("default",)
    channel: Any = Literal[choices]  # a type made at run time: mypy 2 refuses it as a TypeForm
    model = create_model(
        "send_wecom_alert_args",
        __base__=Args,
        channel=(
            channel,
            Field(description=f"alert channel (a WeCom group robot): one of {', '.join(choices)}"),
        ),
    )
    return ToolSpec(
        name=NAME,
        description=(
            "Post a markdown alert to a WeCom group robot channel. It goes through the alert outbox "
            "(rate limit, retries, e-mail fallback) and returns the outbox key."
        ),
        args=model,
        run=run,
        risk="write",
        lookup=lookup,
        summarize=summarize,
    )
