"""RecordSink over table alert_event: decisions and deliveries with their reasons."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import distinct, func, insert, select

from xihe.agent.alert_tables import alert_event
from xihe.agent.alerts.model import AlertRecord
from xihe.agent.alerts.notify.base import Attempt
from xihe.agent.alerts.sql.stores import SqlAlertStores

_INSERT_EVENT = insert(alert_event)


class SqlRecordSink:
    """RecordSink over table alert_event: every decision and every delivery, with its reason."""

    def __init__(self, stores: SqlAlertStores, holder: str = "") -> None:
        self.s = stores
        self.holder = holder

    def record(self, rec: AlertRecord) -> None:
        """Store one pipeline decision."""
        with self.s.tx() as conn:
            conn.execute(
                _INSERT_EVENT,
                {
                    "at": rec.at,
                    "kind": "decision",
                    "event_key": rec.event_key,
                    "instance_id": rec.instance_id,
                    "workflow": rec.workflow,
                    "task": rec.task,
                    "reason": rec.reason.value,
                    "tier": rec.tier.value if rec.tier else None,
                    "detail": rec.detail,
                    "notification_key": rec.notification_key,
                    "holder": self.holder,
                },
            )

    def note(
        self,
        at: datetime,
        reason: str,
        key: str,
        detail: str = "",
        tier: str | None = None,
        instance_id: int | None = None,
    ) -> None:
        """Store a decision that is not about one event (a delivery, a model-raised alert, a
        lifecycle change of the alert of `instance_id`)."""
        with self.s.tx() as conn:
            conn.execute(
                insert(alert_event).values(
                    at=at,
                    instance_id=instance_id,
                    kind="delivery"
                    if reason in ("sent", "send_failed")
                    else "lifecycle"
                    if reason.startswith("life_")
                    else "decision",
                    reason=reason,
                    tier=tier,
                    detail=detail,
                    notification_key=key,
                    holder=self.holder,
                )
            )

    def delivery(self, attempt: Attempt) -> None:
        """Store a delivery outcome (an attempt the deliverer stamped with its row and time)."""
        assert attempt.at is not None
        detail = f"via {attempt.via}" + ("" if attempt.ok else f": {attempt.error}")
        self.note(attempt.at, "sent" if attempt.ok else "send_failed", attempt.key, detail)

    def rows(self, reason: str | None = None, instance_id: int | None = None) -> list[dict[str, Any]]:
        """Records in insertion order, optionally filtered."""
        q = select(alert_event).order_by(alert_event.c.id)
        if reason is not None:
            q = q.where(alert_event.c.reason == reason)
        if instance_id is not None:
            q = q.where(alert_event.c.instance_id == instance_id)
        with self.s.tx() as conn:
            return [dict(r._mapping) for r in conn.execute(q)]

    def suppressed_in(self, window: str, during: tuple[datetime, datetime] | None = None) -> int:
        """How many instances maintenance window `window` (its id or name) suppressed: the decisions
        filed under its end-of-window message (only those in [start, end] of `during`, when given)."""
        c = alert_event.c
        q = select(func.count(distinct(c.instance_id))).where(
            c.reason == "maintenance", c.notification_key.startswith(f"maint:{window}:", autoescape=True)
        )
        if during is not None:
            q = q.where(c.at >= during[0], c.at <= during[1])
        with self.s.tx() as conn:
            return int(conn.execute(q).scalar() or 0)

    def recent(
        self, limit: int, reasons: list[str] | None = None, instance_ids: list[int] | None = None
    ) -> list[dict[str, Any]]:
        """The newest records first, optionally only these reasons or instances (the web pages)."""
        q = select(alert_event).order_by(alert_event.c.id.desc()).limit(limit)
        if reasons is not None:
            q = q.where(alert_event.c.reason.in_(reasons))
        if instance_ids is not None:
            q = q.where(alert_event.c.instance_id.in_(instance_ids))
        with self.s.tx() as conn:
            return [dict(r._mapping) for r in conn.execute(q)]
