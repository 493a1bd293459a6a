"""The plan rows in SQL: `plan_item` (items, claims as leases, completion) and `plan_change` (history).

`claim` is one conditional UPDATE that also checks the dependencies, so two workers racing for the
same item cannot both win, and no item starts while one of its dependencies is not completed.
Every change is appended to `plan_change` with the actor and, for replacements and drops, the reason.
Evidence is checked by `xihe.tools.longtask.evidence` before `complete` is called; this module stores the result.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Engine, and_, exists, insert, or_, select, text, update

from xihe.agent import lease
from xihe.agent.plan_tables import plan_change, plan_item
from xihe.tools.longtask.plans import OPEN, PlanChange, PlanError, PlanItem


def _item(row: Any) -> PlanItem:
    m = row._mapping
    return PlanItem(
        id=m["id"],
        task_id=m["task_id"],
        seq=m["seq"],
        description=m["description"],
        depends_on=tuple(m["depends_on"] or ()),
        status=m["status"],
        lease_owner=m["lease_owner"],
        lease_until=m["lease_until"],
        evidence=m["evidence"],
        reason=m["reason"],
        created_at=m["created_at"],
        updated_at=m["updated_at"],
    )


class PlanStore:
    """plan_item and plan_change rows (SQLite or PostgreSQL)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    # ---- reading
    def items(self, task_id: int) -> list[PlanItem]:
        """The plan of a task, in item order."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(plan_item).where(plan_item.c.task_id == task_id).order_by(plan_item.c.seq)
            )
            return [_item(r) for r in rows]

    def get(self, task_id: int, seq: int) -> PlanItem:
        """One item, or PlanError naming it."""
        with self.engine.connect() as conn:
            row = conn.execute(
                select(plan_item).where(and_(plan_item.c.task_id == task_id, plan_item.c.seq == seq))
            ).first()
        if row is None:
            raise PlanError(f"the plan of task {task_id} has no item #{seq}")
        return _item(row)

    def by_key(self, created_key: str) -> PlanItem | None:
        """The item a step added (its idempotency key), for finding an effect after a crash."""
        with self.engine.connect() as conn:
            row = conn.execute(select(plan_item).where(plan_item.c.created_key == created_key)).first()
        return _item(row) if row is not None else None

    def _completed_by(self, task_id: int, seq: int) -> str | None:
        """Who completed the item (its lease ended then; the change log keeps the name)."""
        c = plan_change.c
        with self.engine.connect() as conn:
            return conn.execute(
                select(c.actor)
                .where(and_(c.task_id == task_id, c.seq == seq, c.change == "completed"))
                .order_by(c.id.desc())
                .limit(1)
            ).scalar()

    def history(self, task_id: int) -> list[PlanChange]:
        """Every change of the plan, oldest first."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(plan_change).where(plan_change.c.task_id == task_id).order_by(plan_change.c.id)
            )
            return [PlanChange(r.seq, r.change, r.actor, r.reason, r.detail, r.at) for r in rows]

    def plans_with_open_items(self, task_ids: list[int]) -> list[int]:
        """Which of these tasks have a plan with open items."""
        if not task_ids:
            return []
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(plan_item.c.task_id)
                .where(and_(plan_item.c.task_id.in_(task_ids), plan_item.c.status.in_(OPEN)))
                .distinct()
            )
            return [int(r[0]) for r in rows]

    # ---- changing
    def add(
        self,
        task_id: int,
        description: str,
        now: datetime,
        *,
        actor: str,
        depends_on: list[int] | tuple[int, ...] = (),
        created_key: str | None = None,
    ) -> PlanItem:
        """Append an item; its dependencies must name items that already exist (so no cycles)."""
        description = description.strip()
        if not description:
            raise PlanError("a plan item needs a description")
        wanted = sorted(set(depends_on))
        with self.engine.begin() as conn:
            _lock_plan(conn, task_id)
            existing = set(
                conn.execute(select(plan_item.c.seq).where(plan_item.c.task_id == task_id)).scalars()
            )
            missing = [d for d in wanted if d not in existing]
            if missing:
                raise PlanError(
                    f"item(s) {', '.join(f'#{d}' for d in missing)} do not exist; an item may only depend "
                    f"on items already in the plan ({', '.join(f'#{s}' for s in sorted(existing)) or 'none yet'})"
                )
            seq = max(existing, default=0) + 1
            conn.execute(
                insert(plan_item).values(
                    task_id=task_id,
                    seq=seq,
                    description=description,
                    depends_on=wanted,
                    status="pending",
                    **lease.released(),
                    evidence=None,
                    reason=None,
                    created_key=created_key,
                    created_at=now,
                    updated_at=now,
                )
            )
            _log(conn, task_id, seq, "added", actor, None, {"description": description}, now)
        return self.get(task_id, seq)

    def claim(
        self,
        task_id: int,
        seq: int,
        owner: str,
        now: datetime,
        lease_for: timedelta,
        *,
        abandoned: Collection[str] = (),
    ) -> PlanItem:
        """Take the item for `owner` (or renew its own claim); PlanError says why not.

        One conditional UPDATE: the item must be pending, or in progress under a lease that is
        free (`xihe.agent.lease`), already ours or held by an `abandoned` owner (a finished task),
        and every dependency must be completed, all checked in the same statement.
        """
        item = self.get(task_id, seq)  # depends_on never changes after add, so reading it first is safe
        dep = plan_item.alias("dep")
        unmet = exists().where(
            and_(
                dep.c.task_id == task_id,
                dep.c.seq.in_(list(item.depends_on) or [-1]),
                dep.c.status != "completed",
            )
        )
        free = or_(
            plan_item.c.status == "pending",
            and_(
                plan_item.c.status == "in_progress",
                or_(
                    lease.claimable(plan_item, owner, now),
                    plan_item.c.lease_owner.in_(list(abandoned) or [""]),
                ),
            ),
        )
        with self.engine.begin() as conn:
            won = conn.execute(
                update(plan_item)
                .where(and_(plan_item.c.id == item.id, free, ~unmet))
                .values(status="in_progress", updated_at=now, **lease.taken(owner, now, lease_for))
            ).rowcount
            if won == 1:
                previous = item.lease_owner
                change = (
                    "reclaimed"
                    if item.status == "in_progress" and previous not in (None, owner)
                    else "claimed"
                )
                _log(conn, task_id, seq, change, owner, None, {"previous_owner": previous}, now)
        if won == 1:
            return self.get(task_id, seq)
        raise PlanError(self._why_not_claimed(task_id, seq, owner, now))

    def _why_not_claimed(self, task_id: int, seq: int, owner: str, now: datetime) -> str:
        item = self.get(task_id, seq)
        if item.status == "in_progress":
            until = f" until {item.lease_until:%H:%M:%S} UTC" if item.lease_until else ""
            return f"item #{seq} is already claimed by {item.lease_owner}{until}"
        if item.status != "pending":
            return f"item #{seq} is {item.status}; it cannot be claimed"
        waiting = [d for d in item.depends_on if self.get(task_id, d).status != "completed"]
        if waiting:
            states = ", ".join(f"#{d} is {self.get(task_id, d).status}" for d in waiting)
            return f"item #{seq} cannot start yet: {states}"
        return f"item #{seq} was taken by another worker"

    def _finish_claimed(
        self,
        task_id: int,
        seq: int,
        owner: str,
        now: datetime,
        status: str,
        detail: dict[str, Any] | None,
        log_reason: str | None,
        **values: Any,
    ) -> bool:
        """in_progress → `status` for the claim's owner only (which ends its lease), logged in the same transaction."""
        held = and_(
            plan_item.c.task_id == task_id, plan_item.c.seq == seq, plan_item.c.status == "in_progress"
        )
        with self.engine.begin() as conn:
            done = conn.execute(
                lease.release(plan_item, held, owner, status=status, updated_at=now, **values)
            ).rowcount
            if done == 1:
                _log(conn, task_id, seq, status, owner, log_reason, detail, now)
        return done == 1

    def complete(
        self, task_id: int, seq: int, owner: str, evidence: dict[str, Any], now: datetime
    ) -> PlanItem:
        """Mark done by its owner with evidence that was already checked; a repeat by the owner is a no-op."""
        if not evidence or not evidence.get("checked"):
            raise PlanError("completion needs evidence that was checked")
        done = self._finish_claimed(
            task_id, seq, owner, now, "completed", {"evidence": evidence}, None, evidence=evidence
        )
        item = self.get(task_id, seq)
        if done or (item.status == "completed" and self._completed_by(task_id, seq) == owner):
            return item
        if item.status == "in_progress":
            raise PlanError(
                f"item #{seq} is claimed by {item.lease_owner}, not by {owner}; only its owner completes it"
            )
        raise PlanError(f"item #{seq} is {item.status}; claim it before completing it")

    def fail(self, task_id: int, seq: int, owner: str, reason: str, now: datetime) -> PlanItem:
        """The owner gives up on the item, saying why (dependents stay blocked)."""
        if not reason.strip():
            raise PlanError("say why the item failed")
        done = self._finish_claimed(task_id, seq, owner, now, "failed", None, reason, reason=reason)
        item = self.get(task_id, seq)
        if done:
            return item
        raise PlanError(
            f"item #{seq} is {item.status}"
            + (f" and claimed by {item.lease_owner}" if item.status == "in_progress" else "")
            + "; only its owner can fail an item it holds"
        )

    def replace(
        self, task_id: int, seq: int, description: str, reason: str, now: datetime, *, actor: str
    ) -> PlanItem:
        """Rewrite an item that is not completed (it starts over as pending); the reason is recorded."""
        return self._change(task_id, seq, "replaced", reason, now, actor, description=description)

    def drop(self, task_id: int, seq: int, reason: str, now: datetime, *, actor: str) -> PlanItem:
        """Cancel an item that is not completed; its dependents can then never start (say so in the reason)."""
        return self._change(task_id, seq, "dropped", reason, now, actor)

    def _change(
        self,
        task_id: int,
        seq: int,
        change: str,
        reason: str,
        now: datetime,
        actor: str,
        *,
        description: str | None = None,
    ) -> PlanItem:
        if not reason.strip():
            raise PlanError("a plan change needs a reason")
        before = self.get(task_id, seq)
        allowed = or_(
            plan_item.c.status.in_(("pending", "failed")),
            and_(plan_item.c.status == "in_progress", lease.claimable(plan_item, actor, now)),
        )
        values: dict[str, Any] = {"updated_at": now, **lease.released()}
        if change == "replaced":
            if not (description or "").strip():
                raise PlanError("a replacement needs the new description")
            values.update(description=description, status="pending", evidence=None, reason=None)
        else:
            values.update(status="cancelled", reason=reason)
        with self.engine.begin() as conn:
            done = conn.execute(
                update(plan_item).where(and_(plan_item.c.id == before.id, allowed)).values(**values)
            ).rowcount
            if done == 1:
                detail = {"before": before.description, "after": description, "status_before": before.status}
                _log(conn, task_id, seq, change, actor, reason, detail, now)
        if done != 1:
            raise PlanError(
                f"item #{seq} is {before.status}"
                + (f" (held by {before.lease_owner})" if before.status == "in_progress" else "")
                + "; only open items not held by someone else can be changed"
            )
        return self.get(task_id, seq)


def _lock_plan(conn: Connection, task_id: int) -> None:
    """Serialize adds to one plan (seq numbering) on PostgreSQL; SQLite serializes writers anyway."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(74262, :t)"), {"t": int(task_id) % 2_000_000_000})


def _log(
    conn: Connection,
    task_id: int,
    seq: int,
    change: str,
    actor: str,
    reason: str | None,
    detail: dict[str, Any] | None,
    now: datetime,
) -> None:
    conn.execute(
        insert(plan_change).values(
            task_id=task_id, seq=seq, change=change, actor=actor, reason=reason, detail=detail, at=now
        )
    )
