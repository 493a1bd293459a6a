"""Owner-scoped facts: remember / recall by (owner, key), with source and time; corrections keep history.

The `memory` table holds one `current` row per (owner, key) and the replaced rows beneath it
(current = false), so a correction replaces the value the bot uses and the old one stays readable.
The owner is always the identity the channel authenticated (the task owner); nothing here takes
it from the model. Whether a value may be written at all (a user statement, a checked tool result,
never a document) is decided by the caller (`tools/memory.py`), which passes the source it checked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, and_, insert, select, text, update

from xihe.agent.core_tables import memory
from xihe.agent.i18n import Lang, say
from xihe.agent.timefmt import show
from xihe.tools.longtask.messages import MEMORY

MAX_KEY = 200
MAX_VALUE = 2000


@dataclass(frozen=True)
class Fact:
    """One remembered value and where it came from."""

    owner: str
    key: str
    value: str
    source: str  # e.g. "user: task 12" or "tool order_query: task 12 step tool:2:0"
    current: bool
    updated_at: datetime

    def line(self, tz: str = "UTC", lang: Lang = "en") -> str:
        """How the model (English) and /memory (in `lang`) see it (the time in `tz`, with its offset)."""
        at = show(self.updated_at, tz, seconds=False)
        return say(MEMORY, "fact", lang, key=self.key, value=self.value, source=self.source, at=at)


@dataclass(frozen=True)
class Remembered:
    """What `remember` did: the fact now current and the value it replaced (None if new or unchanged)."""

    fact: Fact
    replaced: Fact | None
    changed: bool


def _fact(row: Any) -> Fact:
    m = row._mapping
    return Fact(m["owner"], m["key"], m["value"], m["source"], bool(m["current"]), m["updated_at"])


def normalize_key(key: str) -> str:
    """Keys compare with whitespace collapsed (`A3003 : reason` = `A3003:reason`)."""
    return re.sub(r"\s*:\s*", ":", re.sub(r"\s+", " ", key.strip()))[:MAX_KEY]


class MemoryStore:
    """memory rows (SQLite or PostgreSQL)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def remember(self, owner: str, key: str, value: str, source: str, now: datetime) -> Remembered:
        """Set the owner's value for key; a different value demotes the old row to history."""
        key = normalize_key(key)
        value = value.strip()[:MAX_VALUE]
        if not key or not value:
            raise ValueError("a fact needs a key and a value")
        with self.engine.begin() as conn:
            _lock(conn, owner, key)
            row = conn.execute(
                select(memory).where(
                    and_(memory.c.owner == owner, memory.c.key == key, memory.c.current.is_(True))
                )
            ).first()
            old = _fact(row) if row is not None else None
            if old is not None and old.value == value:
                return Remembered(old, None, False)
            if old is not None:
                conn.execute(
                    update(memory)
                    .where(and_(memory.c.owner == owner, memory.c.key == key, memory.c.current.is_(True)))
                    .values(current=False)
                )
            conn.execute(
                insert(memory).values(
                    owner=owner, key=key, value=value, source=source[:200], current=True, updated_at=now
                )
            )
        return Remembered(Fact(owner, key, value, source[:200], True, now), old, True)

    def recall(self, owner: str, key: str) -> Fact | None:
        """The owner's current value for key, or None (another owner's facts are never visible)."""
        with self.engine.connect() as conn:
            row = conn.execute(
                select(memory).where(
                    and_(
                        memory.c.owner == owner,
                        memory.c.key == normalize_key(key),
                        memory.c.current.is_(True),
                    )
                )
            ).first()
        return _fact(row) if row is not None else None

    def facts(self, owner: str, limit: int = 50) -> list[Fact]:
        """The owner's current facts, most recently updated first."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(memory)
                .where(and_(memory.c.owner == owner, memory.c.current.is_(True)))
                .order_by(memory.c.updated_at.desc(), memory.c.id.desc())
                .limit(limit)
            )
            return [_fact(r) for r in rows]

    def history(self, owner: str, key: str) -> list[Fact]:
        """Every value the key had for this owner, oldest first (the last is current)."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(memory)
                .where(and_(memory.c.owner == owner, memory.c.key == normalize_key(key)))
                .order_by(memory.c.id)
            )
            return [_fact(r) for r in rows]

    def corrected_keys(self, owner: str) -> set[str]:
        """Keys whose value was replaced at least once (their current value is a correction)."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(memory.c.key)
                .where(and_(memory.c.owner == owner, memory.c.current.is_(False)))
                .distinct()
            )
            return {r[0] for r in rows}


def _lock(conn: Connection, owner: str, key: str) -> None:
    """Two writers of the same (owner, key) on PostgreSQL take turns (one current row, always)."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(74263, hashtext(:k))"), {"k": f"{owner}\x1f{key}"})
