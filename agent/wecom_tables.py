"""WeCom's tables: the callback inbox and AI-bot streams (migration 3; the inbox's lane, migration 18),
the long connection's lease and outbox of frames (migration 7), the action cards sent (migration 10).
"""

from __future__ import annotations

from sqlalchemy import JSON, BigInteger, Boolean, Column, Index, String, Table, Text

from xihe.agent.lease import lease_columns
from xihe.agent.tables import Id, UTCDateTime, metadata

# Which WeCom callbacks were seen (a retry never runs twice), and which still wait for a worker?
wecom_inbox = Table(
    "wecom_inbox",
    metadata,
    Column("key", String(200), primary_key=True),  # channel:msgid
    Column("seen_at", UTCDateTime, nullable=False),
    Column("status", String(20), nullable=False),  # seen|queued|handling|done
    Column("payload", JSON),  # the verified inbound message while it waits
    Column("lane", String(10)),  # command|chat: which memory lane takes it (NULL: queued before migration 18)
    *lease_columns(),  # the replica that will handle it; after lease_until another may take it
    Column("finished_at", UTCDateTime),
)
Index("ix_wecom_inbox_status", wecom_inbox.c.status, wecom_inbox.c.lease_until)

# What has the AI bot streamed for a message (any replica answers the refresh), and may we still reply?
wecom_stream = Table(
    "wecom_stream",
    metadata,
    Column("id", String(64), primary_key=True),  # stream id we gave WeCom
    Column("msgid", String(200), nullable=False, unique=True),  # the message that opened it
    Column("conversation", String(200), nullable=False, default=""),
    Column("content", Text, nullable=False, default=""),
    Column("finish", Boolean, nullable=False, default=False),
    Column("response_url", Text, nullable=False, default=""),  # one-shot reply capability (1 h)
    Column("response_used", Boolean, nullable=False, default=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
)
Index("ix_wecom_stream_conv", wecom_stream.c.conversation, wecom_stream.c.created_at)

# ---- wecom long connection (migration 7) ---------------------------------------------------------
# Which replica holds the AI bot's one long connection, until when? (WeCom kicks an older connection)
wecom_ws_lease = Table(
    "wecom_ws_lease",
    metadata,
    Column("name", String(200), primary_key=True),  # aibot:<bot id>
    *lease_columns(),  # renewed on every heartbeat
    Column("acquired_at", UTCDateTime, nullable=False),
)

# Which frames did a replica without the connection leave for the holder to send? (late results)
wecom_ws_outbox = Table(
    "wecom_ws_outbox",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("name", String(200), nullable=False),  # aibot:<bot id>
    Column("frame", JSON, nullable=False),  # {cmd, headers: {req_id}, body}
    Column("created_at", UTCDateTime, nullable=False),
    Column("sent_at", UTCDateTime),
)
Index("ix_wecom_ws_outbox_pending", wecom_ws_outbox.c.name, wecom_ws_outbox.c.sent_at, wecom_ws_outbox.c.id)

# ---- action cards (migration 10) ------------------------------------------------------------------
# Which cards were sent for a pending action, to whom, and how can each still be updated in place?
wecom_card = Table(
    "wecom_card",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("task_id", String(128), nullable=False, unique=True),  # the card's WeCom task_id
    Column("channel", String(20), nullable=False),  # app | aibot
    Column("recipient", String(200), nullable=False),  # the member userid it went to
    Column("conversation", String(200), nullable=False),  # the conversation it belongs to
    Column("action_id", BigInteger, nullable=False),  # pending_action.id
    Column("role", String(20), nullable=False),  # confirm (the requester's) | approve (an approver's)
    Column("response_code", Text),  # the unused single-use update codes (72 h), space-separated, or None
    Column("state", String(200), nullable=False),  # the action state the card shows now
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
)
Index("ix_wecom_card_action", wecom_card.c.action_id)
