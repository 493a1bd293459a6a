"""wecom_card rows: the action cards sent, and the single-use code that can still update each one."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, and_, delete, insert, select, update

from xihe.agent.wecom_tables import wecom_card


@dataclass(frozen=True)
class SentCard:
    """One card as sent to one recipient."""

    id: int
    task_id: str
    channel: str
    recipient: str
    conversation: str
    action_id: int
    role: str
    response_code: str | None
    state: str


def _card(row: Any) -> SentCard:
    return SentCard(**{k: row._mapping[k] for k in SentCard.__dataclass_fields__})


class CardStore:
    """Sent cards by task_id and by pending action."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def next_serial(self) -> int:
        """A number not yet used in any card's task_id (task_ids must never repeat)."""
        with self.engine.connect() as conn:
            rows = conn.execute(select(wecom_card.c.id).order_by(wecom_card.c.id.desc()).limit(1)).first()
        return (rows[0] if rows else 0) + 1

    def add(
        self,
        *,
        task_id: str,
        channel: str,
        recipient: str,
        conversation: str,
        action_id: int,
        role: str,
        response_code: str,
        state: str,
        now: datetime,
    ) -> None:
        with self.engine.begin() as conn:
            conn.execute(
                insert(wecom_card).values(
                    task_id=task_id,
                    channel=channel,
                    recipient=recipient,
                    conversation=conversation,
                    action_id=action_id,
                    role=role,
                    response_code=response_code or None,
                    state=state,
                    created_at=now,
                    updated_at=now,
                )
            )

    def remove(self, task_id: str) -> None:
        """Forget a card that could not be sent."""
        with self.engine.begin() as conn:
            conn.execute(delete(wecom_card).where(wecom_card.c.task_id == task_id))

    def by_task(self, task_id: str) -> SentCard | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(wecom_card).where(wecom_card.c.task_id == task_id)).first()
        return _card(row) if row else None

    def for_action(self, action_id: int, role: str | None = None) -> list[SentCard]:
        q = select(wecom_card).where(wecom_card.c.action_id == action_id)
        if role is not None:
            q = q.where(wecom_card.c.role == role)
        with self.engine.connect() as conn:
            return [_card(r) for r in conn.execute(q.order_by(wecom_card.c.id))]

    def fresh_code(self, task_id: str, code: str, now: datetime) -> None:
        """A click brought a new single-use update code for this card (kept with the unused ones)."""
        card = self.by_task(task_id)
        if card is None or not code:
            return
        codes = " ".join([*(card.response_code or "").split(), code])
        with self.engine.begin() as conn:
            conn.execute(
                update(wecom_card)
                .where(wecom_card.c.task_id == task_id)
                .values(response_code=codes, updated_at=now)
            )

    def take_code(self, task_id: str, now: datetime) -> str | None:
        """The card's newest unused update code, spent now (exactly one caller gets it)."""
        card = self.by_task(task_id)
        if card is None or not card.response_code:
            return None
        *rest, newest = card.response_code.split()
        with self.engine.begin() as conn:
            taken = conn.execute(
                update(wecom_card)
                .where(
                    and_(wecom_card.c.task_id == task_id, wecom_card.c.response_code == card.response_code)
                )
                .values(response_code=" ".join(rest) or None, updated_at=now)
            ).rowcount
        return newest if taken == 1 else None

    def unsettled(self, final: tuple[str, ...], channel: str) -> list[SentCard]:
        """`channel`'s cards whose shown state is not one of the `final` ones (they may need an update)."""
        c = wecom_card.c
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(wecom_card).where(c.state.not_in(final), c.channel == channel).order_by(c.id)
            )
            return [_card(r) for r in rows]

    def shown(self, task_id: str, state: str, now: datetime) -> None:
        """The card now shows `state`."""
        with self.engine.begin() as conn:
            conn.execute(
                update(wecom_card).where(wecom_card.c.task_id == task_id).values(state=state, updated_at=now)
            )
