"""Server-side sessions of /ui, in the store so every replica shares them.

The cookie carries only a random session id (signed); the store keeps its sha256 with the user, the
login method, the token's fingerprint, created / last seen / absolute expiry, and when and why it
ended. A session ends on logout, after `session_idle_minutes` without a request, at its absolute
end (`session_hours`), when `xihe ui sessions end` ends it, and when the configuration no longer
lets its user in (token changed, user left access.yaml, login method off), checked on every request
and on every config reload.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine, insert, select, update

from xihe.agent.web.ui.auth import login_refusal
from xihe.agent.web_tables import ui_session
from xihe.config.load import Settings
from xihe.config.ui import UiConfig

TOUCH_EVERY = timedelta(seconds=60)  # last_seen is written at most this often (not on every page view)


def sid_hash(sid: str) -> str:
    """What the store keeps of a session id: a stolen table does not give working cookies."""
    return hashlib.sha256(sid.encode()).hexdigest()


@dataclass(frozen=True)
class SessionRow:
    """One session as the store has it."""

    id: int
    user: str
    via: str
    token_fp: str
    client: str
    created_at: datetime
    last_seen_at: datetime
    expires_at: datetime
    ended_at: datetime | None
    end_reason: str | None


def _row(r: Any) -> SessionRow:
    return SessionRow(
        r.id,
        r.user_id,
        r.via,
        r.token_fp,
        r.client,
        r.created_at,
        r.last_seen_at,
        r.expires_at,
        r.ended_at,
        r.end_reason,
    )


def lapsed(row: SessionRow, now: datetime, idle: timedelta) -> str | None:
    """Why a session is over by time or by hand, or None while it lives."""
    if row.ended_at is not None:
        return row.end_reason or "ended"
    if now >= row.expires_at:
        return "expired"
    if now - row.last_seen_at >= idle:
        return "idle"
    return None


class SessionStore:
    """The ui_session table."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def start(self, user: str, via: str, token_fp: str, client: str, now: datetime, hours: float) -> str:
        """A new session; returns its secret id (only its hash is stored)."""
        sid = secrets.token_urlsafe(32)
        with self.engine.begin() as conn:
            conn.execute(
                insert(ui_session).values(
                    sid_hash=sid_hash(sid),
                    user_id=user,
                    via=via,
                    token_fp=token_fp,
                    client=client[:64],
                    created_at=now,
                    last_seen_at=now,
                    expires_at=now + timedelta(hours=hours),
                )
            )
        return sid

    def find(self, sid: str) -> SessionRow | None:
        """The session of a cookie's id (ended ones too), or None."""
        with self.engine.connect() as conn:
            r = conn.execute(select(ui_session).where(ui_session.c.sid_hash == sid_hash(sid))).first()
        return _row(r) if r is not None else None

    def touch(self, row: SessionRow, now: datetime) -> None:
        """Record a request (at most every TOUCH_EVERY)."""
        if now - row.last_seen_at < TOUCH_EVERY:
            return
        with self.engine.begin() as conn:
            conn.execute(update(ui_session).where(ui_session.c.id == row.id).values(last_seen_at=now))

    def end(
        self, now: datetime, reason: str, *, session_id: int | None = None, user: str | None = None
    ) -> int:
        """End one session (by id) or all of a user's; the number that were still open."""
        q = update(ui_session).where(ui_session.c.ended_at.is_(None))
        if session_id is not None:
            q = q.where(ui_session.c.id == session_id)
        elif user is not None:
            q = q.where(ui_session.c.user_id == user)
        else:
            raise ValueError("end() needs a session id or a user")
        with self.engine.begin() as conn:
            return int(conn.execute(q.values(ended_at=now, end_reason=reason[:80])).rowcount)

    def open(self, now: datetime, *, user: str | None = None, with_ended: bool = False) -> list[SessionRow]:
        """Sessions not ended nor past their absolute end (all of them with `with_ended`), newest first."""
        q = select(ui_session).order_by(ui_session.c.id.desc())
        if not with_ended:
            q = q.where(ui_session.c.ended_at.is_(None), ui_session.c.expires_at > now)
        if user is not None:
            q = q.where(ui_session.c.user_id == user)
        with self.engine.connect() as conn:
            return [_row(r) for r in conn.execute(q)]


def end_refused(
    store: SessionStore, settings: Settings, config: UiConfig, now: datetime
) -> list[tuple[SessionRow, str]]:
    """End every open session whose user the configuration no longer lets in; (session, why) each."""
    ended = []
    for row in store.open(now):
        why = login_refusal(settings, config, row.user, row.via, row.token_fp)
        if why is not None and store.end(now, why, session_id=row.id):
            ended.append((row, why))
    return ended
