"""Failed-login throttling, the same on every replica: counted in the store, never in memory.

Each login try is written as a row (user id typed, client address, time) *before* the token is
checked, and counted over the sliding window; a try beyond a limit is refused unchecked, so
concurrent guesses cannot slip past the count. When a user id or a client address reaches its limit
it is locked until `now + lockout`; tries during a lockout are refused without a check and without a
new row (they only raise the lock's `refused` count). A success removes its own row and the user's
earlier failures; a client's failures stay until the window passes them.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Column, Engine, delete, func, insert, select, update

from xihe.agent.web_tables import ui_login_attempt, ui_login_lock
from xihe.config.ui import LoginThrottle

USER_KEY_CHARS = 120
CLIENT_CHARS = 64
SHOWN_USERS = 5  # user ids a client lock's audit names


def bounded(text: str, limit: int) -> str:
    """Printable text of at most `limit` characters (control and format characters dropped)."""
    kept = "".join(c for c in text if unicodedata.category(c)[0] != "C")
    return kept[:limit]


def user_key(user: str) -> str | None:
    """What a typed user id counts under: case-folded and bounded (None when empty)."""
    key = bounded(user.strip(), USER_KEY_CHARS).casefold()
    return key or None


@dataclass(frozen=True)
class Lock:
    """A user id or client address that may not log in until `until`."""

    scope: str  # user | client
    key: str
    until: datetime
    failures: int
    new: bool = False  # set by this try (the caller audits it)
    users: tuple[str, ...] = ()  # for a new client lock: user ids tried from it in the window


@dataclass(frozen=True)
class Attempt:
    """A try that may go on to the token check."""

    row_id: int
    user: str | None
    client: str
    user_count: int  # tries of this user id in the window, this one included
    client_count: int


def over(count: int, limit: int) -> bool:
    """A try beyond the limit is refused without a check."""
    return count > limit


def reached(count: int, limit: int) -> bool:
    """The failure that reaches the limit starts the lockout."""
    return count >= limit


class LoginThrottles:
    """The SQL side: attempt rows, lock rows."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def begin(self, user: str | None, client: str, now: datetime, policy: LoginThrottle) -> Attempt | Lock:
        """Refuse a locked user id or client at once; else count this try and refuse it beyond a limit."""
        client = bounded(client, CLIENT_CHARS) or "-"
        keys = [("client", client)] + ([("user", user)] if user else [])
        with self.engine.begin() as conn:
            for scope, key in keys:
                lock = conn.execute(
                    select(ui_login_lock)
                    .where(
                        ui_login_lock.c.scope == scope,
                        ui_login_lock.c.key == key,
                        ui_login_lock.c.until > now,
                    )
                    .order_by(ui_login_lock.c.until.desc())
                    .limit(1)
                ).first()
                if lock is not None:
                    conn.execute(
                        update(ui_login_lock)
                        .where(ui_login_lock.c.id == lock.id)
                        .values(refused=ui_login_lock.c.refused + 1)
                    )
                    return Lock(scope, key, lock.until, lock.failures)
        with self.engine.begin() as conn:  # committed before counting: concurrent tries see each other
            inserted = conn.execute(insert(ui_login_attempt).values(user_key=user, client=client, at=now))
            row_id = int(inserted.inserted_primary_key[0])  # type: ignore[index]
        since = now - timedelta(minutes=policy.window_minutes)
        user_count = self._count(ui_login_attempt.c.user_key, user, since) if user else 0
        attempt = Attempt(
            row_id, user, client, user_count, self._count(ui_login_attempt.c.client, client, since)
        )
        if user and over(user_count, policy.user_failures):
            return self._lock("user", user, user_count, now, policy)
        if over(attempt.client_count, policy.client_failures):
            return self._lock("client", client, attempt.client_count, now, policy)
        return attempt

    def failed(self, attempt: Attempt, now: datetime, policy: LoginThrottle) -> list[Lock]:
        """The try failed: the locks it starts (its row stays and counts)."""
        locks = []
        if attempt.user and reached(attempt.user_count, policy.user_failures):
            locks.append(self._lock("user", attempt.user, attempt.user_count, now, policy))
        if reached(attempt.client_count, policy.client_failures):
            locks.append(self._lock("client", attempt.client, attempt.client_count, now, policy))
        return locks

    def succeeded(self, attempt: Attempt) -> None:
        """The try succeeded: it and the user's earlier failures no longer count."""
        with self.engine.begin() as conn:
            conn.execute(delete(ui_login_attempt).where(ui_login_attempt.c.id == attempt.row_id))
            if attempt.user:
                conn.execute(delete(ui_login_attempt).where(ui_login_attempt.c.user_key == attempt.user))

    def _count(self, column: Column[Any], value: str, since: datetime) -> int:
        q = (
            select(func.count())
            .select_from(ui_login_attempt)
            .where(column == value, ui_login_attempt.c.at > since)
        )
        with self.engine.connect() as conn:
            return int(conn.execute(q).scalar_one())

    def _lock(self, scope: str, key: str, failures: int, now: datetime, policy: LoginThrottle) -> Lock:
        until = now + timedelta(minutes=policy.lockout_minutes)
        users: tuple[str, ...] = ()
        with self.engine.begin() as conn:
            conn.execute(
                insert(ui_login_lock).values(
                    scope=scope, key=key, created_at=now, until=until, failures=failures, refused=0
                )
            )
            if scope == "client":
                since = now - timedelta(minutes=policy.window_minutes)
                q = (
                    select(ui_login_attempt.c.user_key)
                    .where(ui_login_attempt.c.client == key, ui_login_attempt.c.at > since)
                    .where(ui_login_attempt.c.user_key.is_not(None))
                    .distinct()
                    .order_by(ui_login_attempt.c.user_key)
                    .limit(SHOWN_USERS)
                )
                users = tuple(conn.execute(q).scalars())
        return Lock(scope, key, until, failures, new=True, users=users)
