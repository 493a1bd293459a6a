"""The web UI's tables (migration 9): server-side sessions and failed-login throttling.

Every replica reads the same rows, so a logout, a lockout or `xihe ui sessions end` holds everywhere.
"""

from __future__ import annotations

from sqlalchemy import Column, Index, Integer, String, Table

from xihe.agent.tables import Id, UTCDateTime, metadata

# Who is logged in to /ui, since when, until when, and did it end? (the cookie carries only the id)
ui_session = Table(
    "ui_session",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),  # the handle `xihe ui sessions` shows
    Column("sid_hash", String(64), nullable=False, unique=True),  # sha256 of the cookie's random id
    Column("user_id", String(120), nullable=False),
    Column("via", String(20), nullable=False),  # token | wecom
    Column("token_fp", String(32), nullable=False, default=""),  # fingerprint of the token used
    Column("client", String(64), nullable=False, default=""),
    Column("created_at", UTCDateTime, nullable=False),
    Column("last_seen_at", UTCDateTime, nullable=False),
    Column("expires_at", UTCDateTime, nullable=False),  # the absolute end
    Column("ended_at", UTCDateTime),
    Column("end_reason", String(80)),  # logout | idle | expired | ended by … | token changed | …
)
Index("ix_ui_session_user", ui_session.c.user_id, ui_session.c.ended_at)

# Which login tries counted against a user id and a client address, and when? (the sliding window)
ui_login_attempt = Table(
    "ui_login_attempt",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("user_key", String(120)),  # the user id typed (bounded, case-folded); null: none was
    Column("client", String(64), nullable=False),  # the client address
    Column("at", UTCDateTime, nullable=False),
)
Index("ix_ui_login_attempt_user", ui_login_attempt.c.user_key, ui_login_attempt.c.at)
Index("ix_ui_login_attempt_client", ui_login_attempt.c.client, ui_login_attempt.c.at)

# Which user id or client address may not log in until when, and how many tries met the lock?
ui_login_lock = Table(
    "ui_login_lock",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("scope", String(10), nullable=False),
    Column("key", String(120), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("until", UTCDateTime, nullable=False),
    Column("failures", Integer, nullable=False),
    Column("refused", Integer, nullable=False, default=0),
)
Index("ix_ui_login_lock_key", ui_login_lock.c.scope, ui_login_lock.c.key, ui_login_lock.c.until)
