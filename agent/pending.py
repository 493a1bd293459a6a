"""Pending actions: a risky call waiting for its requester's yes (and an approver's, in production).

A row is bound to (user, conversation, tool, canonical-args digest, expiry). Every transition is a
single conditional UPDATE, so a confirmation is consumed exactly once even across replicas.

Expiry is one rule, `expired(action, now)`, with its SQL twin `_waiting_past(now)`: an action still
waiting for a person (the requester's yes, or an approver) at or after `expires_at` can no longer be
confirmed, approved or released. A released action (confirmed, and approved where needed) is past
waiting: it runs when its task resumes, however late that is.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Engine, and_, insert, or_, select, update

from xihe.agent.core_tables import pending_action


@dataclass(frozen=True)
class PendingAction:
    """A stored request for confirmation."""

    id: int
    task_id: int
    step_key: str
    user_id: str
    conversation: str
    tool: str
    args_json: str
    args_digest: str
    environment: str
    reason: str
    needs_approval: bool
    status: str
    confirmed_at: datetime | None
    approved_by: str | None
    approved_at: datetime | None
    expires_at: datetime
    created_at: datetime
    closed_by: str | None = None  # who rejected or cancelled it
    close_note: str | None = None  # the rejecter's reason, when one was given

    @property
    def released(self) -> bool:
        """Confirmed by the requester and, where needed, approved by someone else."""
        return self.status == "confirmed" and (not self.needs_approval or self.approved_by is not None)


LIVE = ("pending", "confirmed")  # not yet executed, cancelled, rejected or expired
MCP_PREFIX = "mcp:"  # the conversation of a user's MCP client calls: `mcp:<user>`


def mcp_conversation(user: str) -> str:
    """The conversation a user's MCP client calls run in (one per user, whatever the client)."""
    return f"{MCP_PREFIX}{user}"


def confirmable_here(action: PendingAction, user: str, conversation: str) -> bool:
    """Whether `user` may confirm `action` from `conversation`: only its requester, in the conversation
    it was asked in, or, for an action an MCP client asked for (which has no chat of its own to answer
    in), from any chat of that same user (`/confirm ID`; the client's word never counts)."""
    if action.user_id != user:
        return False
    return action.conversation in (conversation, mcp_conversation(user))


def waiting(action: PendingAction) -> bool:
    """Still waiting for a person: the requester's yes, or (in production) an approver."""
    return action.status == "pending" or (
        action.status == "confirmed" and action.needs_approval and action.approved_by is None
    )


def expired(action: PendingAction, now: datetime) -> bool:
    """The expiry rule: a waiting action whose time is up (at or after `expires_at`)."""
    return waiting(action) and now >= action.expires_at


def _in_time(now: datetime) -> ColumnElement[bool]:
    """SQL: the action's time is not up yet (the complement of the time part of `expired`)."""
    return pending_action.c.expires_at > now


def _waiting_past(now: datetime) -> ColumnElement[bool]:
    """SQL twin of `expired`."""
    c = pending_action.c
    waiting_row = or_(
        c.status == "pending",
        and_(c.status == "confirmed", c.needs_approval.is_(True), c.approved_by.is_(None)),
    )
    return and_(waiting_row, ~_in_time(now))


def _pa(row: Any) -> PendingAction:
    return PendingAction(**{k: row._mapping[k] for k in PendingAction.__dataclass_fields__})


class PendingStore:
    """pending_action rows."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def create(
        self,
        *,
        task_id: int,
        step_key: str,
        user_id: str,
        conversation: str,
        tool: str,
        args_json: str,
        args_digest: str,
        environment: str,
        reason: str,
        needs_approval: bool,
        now: datetime,
        expires_at: datetime,
    ) -> PendingAction:
        """Insert, or return the existing row for this (task, step)."""
        existing = self.for_step(task_id, step_key)
        if existing is not None:
            return existing
        with self.engine.begin() as conn:
            conn.execute(
                insert(pending_action).values(
                    task_id=task_id,
                    step_key=step_key,
                    user_id=user_id,
                    conversation=conversation,
                    tool=tool,
                    args_json=args_json,
                    args_digest=args_digest,
                    environment=environment,
                    reason=reason,
                    needs_approval=needs_approval,
                    status="pending",
                    expires_at=expires_at,
                    created_at=now,
                    updated_at=now,
                )
            )
        found = self.for_step(task_id, step_key)
        assert found is not None
        return found

    def get(self, action_id: int) -> PendingAction | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(pending_action).where(pending_action.c.id == action_id)).first()
        return _pa(row) if row else None

    def for_step(self, task_id: int, step_key: str) -> PendingAction | None:
        with self.engine.connect() as conn:
            row = conn.execute(
                select(pending_action).where(
                    and_(pending_action.c.task_id == task_id, pending_action.c.step_key == step_key)
                )
            ).first()
        return _pa(row) if row else None

    def open_for(
        self,
        *,
        user_id: str | None = None,
        conversation: str | None = None,
        statuses: tuple[str, ...] = ("pending",),
    ) -> list[PendingAction]:
        """Newest first."""
        q = (
            select(pending_action)
            .where(pending_action.c.status.in_(statuses))
            .order_by(pending_action.c.id.desc())
        )
        if user_id is not None:
            q = q.where(pending_action.c.user_id == user_id)
        if conversation is not None:
            q = q.where(pending_action.c.conversation == conversation)
        with self.engine.connect() as conn:
            return [_pa(r) for r in conn.execute(q)]

    def awaiting_approval(self) -> list[PendingAction]:
        """Confirmed production writes that still need an approver."""
        q = select(pending_action).where(
            and_(
                pending_action.c.status.in_(LIVE),
                pending_action.c.needs_approval.is_(True),
                pending_action.c.approved_by.is_(None),
            )
        )
        with self.engine.connect() as conn:
            return [_pa(r) for r in conn.execute(q.order_by(pending_action.c.id))]

    def _transition(self, action_id: int, now: datetime, where: list[Any], **values: Any) -> bool:
        with self.engine.begin() as conn:
            q = update(pending_action).where(and_(pending_action.c.id == action_id, *where))
            return conn.execute(q.values(updated_at=now, **values)).rowcount == 1

    def confirm(self, action_id: int, user_id: str, conversation: str, now: datetime) -> bool:
        """pending → confirmed, only for the bound user in the bound conversation before expiry."""
        c = pending_action.c
        return self._transition(
            action_id,
            now,
            [c.status == "pending", c.user_id == user_id, c.conversation == conversation, _in_time(now)],
            status="confirmed",
            confirmed_at=now,
        )

    def approve(self, action_id: int, approver: str, now: datetime) -> bool:
        """Record an approver (never the requester) on a live action that needs one."""
        c = pending_action.c
        return self._transition(
            action_id,
            now,
            [
                c.status.in_(LIVE),
                c.needs_approval.is_(True),
                c.approved_by.is_(None),
                c.user_id != approver,
                _in_time(now),
            ],
            approved_by=approver,
            approved_at=now,
        )

    def consume(self, action_id: int, args_digest: str, now: datetime) -> bool:
        """confirmed → executed, once, only for the exact arguments that were confirmed."""
        c = pending_action.c
        where = [c.status == "confirmed", c.args_digest == args_digest]
        row = self.get(action_id)
        if row is None or (row.needs_approval and row.approved_by is None):
            return False
        return self._transition(action_id, now, where, status="executed")

    def close(
        self, action_id: int, status: str, now: datetime, *, by: str | None = None, note: str = ""
    ) -> bool:
        """pending/confirmed → cancelled | rejected, recording by whom and why (expiry goes through `expire`)."""
        c = pending_action.c
        where: list[Any] = [c.status.in_(LIVE)]
        if status == "cancelled" and by is not None:
            where.append(c.user_id == by)
        return self._transition(action_id, now, where, status=status, closed_by=by, close_note=note or None)

    def expire_due(self, now: datetime) -> list[PendingAction]:
        """Turn every `expired` action into the visible `expired` state; return them."""
        with self.engine.connect() as conn:
            due = [_pa(r) for r in conn.execute(select(pending_action).where(_waiting_past(now)))]
        return [p for p in due if self.expire(p.id, now)]

    def expire(self, action_id: int, now: datetime) -> bool:
        """waiting → expired, only once its time is up (see `expired`)."""
        return self._transition(action_id, now, [_waiting_past(now)], status="expired")
