"""The terminal chats' mail (migration 10): messages for conversations no channel claims, waiting for
the `xihe chat` of that conversation to print them (`xihe.agent.mailbox`)."""

from __future__ import annotations

from sqlalchemy import Column, Index, String, Table, Text

from xihe.agent.tables import Id, UTCDateTime, metadata

# Which late messages (a run's start, progress, end; an approval's outcome) wait for which terminal chat?
chat_mail = Table(
    "chat_mail",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("conversation", String(200), nullable=False),  # e.g. cli:alice
    Column("text", Text, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
)
Index("ix_chat_mail_conversation", chat_mail.c.conversation, chat_mail.c.id)
