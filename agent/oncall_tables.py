"""On-call overrides from chat (migration 15): who covers whose duty in a team, from when to when
(`xihe.agent.oncall.overrides`). A row ends by itself at `end_at`; nothing deletes it before."""

from __future__ import annotations

from sqlalchemy import Column, Index, String, Table, Text

from xihe.agent.tables import Id, UTCDateTime, metadata

# Who took or swapped which team's on-call duty, for when, and who asked?
oncall_override = Table(
    "oncall_override",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("team", String(64), nullable=False),
    Column("kind", String(10), nullable=False),  # take | swap
    Column("user_id", String(64), nullable=False),  # who covers
    Column("replaces", String(64), nullable=False, default=""),  # swap: whose duty ('' for take)
    Column("start_at", UTCDateTime, nullable=False),
    Column("end_at", UTCDateTime, nullable=False),
    Column("created_by", String(64), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("note", Text, nullable=False, default=""),  # the command as typed
)
Index("ix_oncall_override_team_end", oncall_override.c.team, oncall_override.c.end_at)
