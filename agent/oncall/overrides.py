"""On-call overrides in the store (table `oncall_override`), shared by every replica.

A row is written once and never changed: it is in force from `start_at` to `end_at` and then simply
stops counting, so overrides expire by themselves with no job.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, insert, select

from xihe.agent.oncall.rotation import Override
from xihe.agent.oncall_tables import oncall_override

_O = oncall_override.c


def _override(row: Any) -> Override:
    m = row._mapping
    return Override(
        m["team"],
        m["kind"],
        m["user_id"],
        m["replaces"] or "",
        m["start_at"],
        m["end_at"],
        m["created_by"],
        m["created_at"],
        int(m["id"]),
    )


class SqlOverrides:
    """The overrides of every team over table `oncall_override`."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def add(self, o: Override, note: str = "") -> Override:
        """Store `o`; returns it with its id."""
        with self.engine.begin() as conn:
            row = conn.execute(
                insert(oncall_override)
                .values(
                    team=o.team,
                    kind=o.kind,
                    user_id=o.user,
                    replaces=o.replaces,
                    start_at=o.start,
                    end_at=o.end,
                    created_by=o.created_by,
                    created_at=o.created_at,
                    note=note[:500],
                )
                .returning(_O.id)
            ).scalar_one()
        return Override(o.team, o.kind, o.user, o.replaces, o.start, o.end, o.created_by, o.created_at, row)

    def overlapping(self, teams: Iterable[str], start: datetime, end: datetime) -> list[Override]:
        """Overrides of `teams` in force at some moment of [start, end), oldest first."""
        q = (
            select(oncall_override)
            .where(_O.team.in_(list(teams)), _O.start_at < end, _O.end_at > start)
            .order_by(_O.id)
        )
        with self.engine.connect() as conn:
            return [_override(r) for r in conn.execute(q)]
