"""One lease: which worker holds a row, and until when.

Every table whose rows one worker at a time may hold (a replica `host:pid`, a task `task:12`)
carries the same two columns, made by `lease_columns()`:

    lease_owner   who holds the row (NULL: nobody)
    lease_until   when the hold lapses (NULL: never taken, or released)

A row is held while `now <= lease_until`; before it was taken, once released, or after that time
it is free. The operations:

- `claim`: one named row, taken when it is free or already the claimer's (a claim by the holder
  extends it). One conditional UPDATE, so of two claimers exactly one wins.
- `claim_batch`: up to `limit` free rows, so work in progress is not handed out twice, not even
  to its holder (`own=True` hands the claimer's own back too: a job whose rows are all written
  back each run). PostgreSQL picks them with `SELECT … FOR UPDATE SKIP LOCKED`; SQLite (one writer
  at a time) with `UPDATE … WHERE key IN (SELECT … LIMIT n) RETURNING`.
- `renew`: by its owner only, while it still holds the row; a lapsed lease is claimed again.
- `release`: by its owner only, the one way: both columns back to NULL. A row's own change that
  ends its lease (sent, done, completed) writes `released()` in the same UPDATE.
- `take_over`: compare-and-swap from the lease as it was read (a dead holder's lease, broken).
- `is_held(until, now)`: the same rule in Python, for rows already read.

The functions build SQL from a `now` the caller passes (its injected clock, read once); the
caller runs the statement in its own transaction, its conditions and values riding on the same
UPDATE. Nothing here depends on the back end but `claim_batch`, which runs in the caller's
connection.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Column, Connection, Row, String, Table, Update, and_, or_, select, update
from sqlalchemy.sql.elements import ColumnElement

from xihe.agent.held import is_held as is_held  # the rule in Python (agent/held.py), also importable here
from xihe.agent.tables import UTCDateTime

OWNER_LENGTH = 120  # a `host:pid` holder name, a `task:<id>` worker


def lease_columns() -> tuple[Column[str], Column[datetime]]:
    """The two lease columns, for a table definition: `Table("t", metadata, ..., *lease_columns())`."""
    return Column("lease_owner", String(OWNER_LENGTH)), Column("lease_until", UTCDateTime)


# ---- conditions ------------------------------------------------------------------------------


def free(table: Table, now: datetime) -> ColumnElement[bool]:
    """Nobody holds the row at `now`: never taken, released, or lapsed."""
    return or_(table.c.lease_until.is_(None), table.c.lease_until < now)


def held(table: Table, now: datetime) -> ColumnElement[bool]:
    """Somebody holds the row at `now`."""
    return table.c.lease_until >= now


def held_by(table: Table, owner: str, now: datetime) -> ColumnElement[bool]:
    """`owner` holds the row at `now`."""
    return and_(table.c.lease_owner == owner, held(table, now))


def claimable(table: Table, owner: str, now: datetime) -> ColumnElement[bool]:
    """`owner` may claim the row at `now`: it is free, or `owner`'s already."""
    return or_(free(table, now), table.c.lease_owner == owner)


def unclaimed_or_owned(table: Table, owner: Any) -> ColumnElement[bool]:
    """Nobody's name is on the row, or `owner`'s is: what a holder may still write back."""
    return or_(table.c.lease_owner.is_(None), table.c.lease_owner == owner)


# ---- values ----------------------------------------------------------------------------------


def taken(owner: str, now: datetime, ttl: timedelta) -> dict[str, Any]:
    """The columns of a lease `owner` holds from `now` for `ttl`."""
    return {"lease_owner": owner, "lease_until": now + ttl}


def released() -> dict[str, Any]:
    """The columns of a row nobody holds: the one way a lease ends."""
    return {"lease_owner": None, "lease_until": None}


# ---- statements ------------------------------------------------------------------------------


def claim(
    table: Table, where: ColumnElement[bool], owner: str, now: datetime, ttl: timedelta, **values: Any
) -> Update:
    """Take the row(s) matching `where` for `owner` until `now + ttl` if free or already `owner`'s."""
    return update(table).where(where, claimable(table, owner, now)).values(**taken(owner, now, ttl), **values)


def renew(
    table: Table, where: ColumnElement[bool], owner: str, now: datetime, ttl: timedelta, **values: Any
) -> Update:
    """Extend `owner`'s live lease on the row(s) matching `where` to `now + ttl`."""
    return update(table).where(where, held_by(table, owner, now)).values(lease_until=now + ttl, **values)


def release(table: Table, where: ColumnElement[bool], owner: Any, **values: Any) -> Update:
    """End `owner`'s lease on the row(s) matching `where` (live or lapsed; a row another took is left)."""
    return update(table).where(where, table.c.lease_owner == owner).values(**released(), **values)


def take_over(
    table: Table,
    where: ColumnElement[bool],
    seen: tuple[str | None, datetime | None],
    owner: str,
    now: datetime,
    ttl: timedelta,
    **values: Any,
) -> Update:
    """Take the row from the lease `seen` (owner, until) as it was read: of two takers, one wins."""
    seen_owner, seen_until = seen
    c = table.c
    same = and_(
        c.lease_owner.is_(None) if seen_owner is None else c.lease_owner == seen_owner,
        c.lease_until.is_(None) if seen_until is None else c.lease_until == seen_until,
    )
    return update(table).where(where, same).values(**taken(owner, now, ttl), **values)


def claim_batch(
    conn: Connection,
    table: Table,
    owner: str,
    now: datetime,
    ttl: timedelta,
    *,
    where: ColumnElement[bool],
    order_by: Sequence[Any],
    limit: int,
    own: bool = False,
    **values: Any,
) -> list[Row[Any]]:
    """Claim up to `limit` free rows (with `own`, also `owner`'s) matching `where`, first by `order_by`.

    The claimed rows come back in no particular order. Run it inside the caller's transaction.
    """
    (key,) = table.primary_key.columns
    wanted = and_(where, claimable(table, owner, now) if own else free(table, now))
    pick = select(key).where(wanted).order_by(*order_by).limit(limit)
    if conn.dialect.name == "postgresql":
        keys = list(conn.execute(pick.with_for_update(skip_locked=True)).scalars())
        if not keys:
            return []
        chosen = key.in_(keys)
    else:
        chosen = key.in_(pick.scalar_subquery())
    stmt = update(table).where(chosen, wanted).values(**taken(owner, now, ttl), **values)
    return list(conn.execute(stmt.returning(*table.c)).all())
