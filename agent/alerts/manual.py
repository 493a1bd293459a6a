"""Render a message the model raises itself (tool send_wecom_alert) into an outbox row.

The title is encoded for one line (`wecom_markdown.inline`); the body is the model's markdown, kept
as markdown (headings, bold, quotes, code) but unable to link, mention or colour anything
(`wecom_markdown.reply`: only the `mentions` argument pages people) and cut to the robot's byte
limit. The row goes through the same outbox and deliverer as pipeline alerts.
"""

from __future__ import annotations

from datetime import datetime

from xihe.agent import wecom_markdown as md
from xihe.agent.alerts.outbox import OutboxRow
from xihe.agent.alerts.render import fit_bytes
from xihe.tools.send_wecom_alert import USERID


def render_manual(title: str, body: str, mentions: tuple[str, ...], max_bytes: int = 4096) -> str:
    """WeCom markdown: a heading, the body, then the mentions; within `max_bytes` UTF-8 bytes."""
    head = f"## {md.inline(title) or 'xihe'}\n"
    tail = ("\n" + "".join(md.mention(m) for m in mentions)) if mentions else ""
    text = md.reply(body.replace("\r\n", "\n").replace("\r", "\n")).strip()
    room = max_bytes - len((head + tail).encode("utf-8"))
    return head + fit_bytes(text, max(room, 0)) + tail


def manual_row(
    key: str,
    channel: str,
    title: str,
    body: str,
    mentions: tuple[str, ...],
    now: datetime,
    max_bytes: int = 4096,
) -> OutboxRow:
    """A pending outbox row, due at once."""
    bad = [m for m in mentions if not USERID.match(m)]
    if bad:
        raise ValueError(f"not a WeCom user id: {', '.join(bad)}")
    tier = "P0" if mentions else "P1"
    text = render_manual(title, body, mentions, max_bytes)
    return OutboxRow(key, "manual", tier, channel, f"[xihe {tier}] {title[:150]}", text, now, now)
