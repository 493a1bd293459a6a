"""LifeStore over tables alert_life and alert_page: alert lifecycles shared by replicas.

A page's claim is its (alert, step) primary key: the replica whose insert lands pages that step, any
other replica (or a restart that replays the tick) finds it taken. Calls join the pipeline's unit of
work when one is open (`SqlAlertStores.tx`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from sqlalchemy import func, insert, select, update

from xihe.agent.alert_tables import alert_life, alert_page
from xihe.agent.alerts.lifecycle import OPEN, Alert
from xihe.agent.alerts.lifestore import PageRow
from xihe.agent.alerts.model import Tier
from xihe.agent.alerts.sql.stores import SqlAlertStores

_L = alert_life.c
_P = alert_page.c
_FIELDS = (
    "instance_id",
    "project",
    "workflow",
    "business_date",
    "tier",
    "channel",
    "state",
    "fired_at",
    "notification_key",
    "acked_at",
    "acked_by",
    "resolved_at",
    "resolved_by",
    "resolved_how",
    "resolved_instance",
    "pages",
    "steps_done",
    "next_page_at",
)


def _alert(r: Any) -> Alert:
    m = r._mapping
    values = {k: m[k] for k in _FIELDS}
    values["tier"] = Tier(values["tier"])
    return Alert(id=int(m["id"]), **values)


def _row(a: Alert) -> dict[str, Any]:
    out = {k: getattr(a, k) for k in _FIELDS}
    out["tier"] = a.tier.value
    return out


class SqlLifeStore:
    """LifeStore over alert_life (one row per failed instance) and alert_page (one per step paged)."""

    def __init__(self, stores: SqlAlertStores) -> None:
        self.s = stores

    def get(self, instance_id: int) -> Alert | None:
        """The alert of `instance_id`, or None."""
        with self.s.tx() as conn:
            r = conn.execute(select(alert_life).where(_L.instance_id == instance_id)).first()
        return _alert(r) if r is not None else None

    def by_id(self, alert_id: int) -> Alert | None:
        """The alert A<alert_id>, or None."""
        with self.s.tx() as conn:
            r = conn.execute(select(alert_life).where(_L.id == alert_id)).first()
        return _alert(r) if r is not None else None

    def save(self, alert: Alert) -> Alert:
        """Insert (id 0) or update by id."""
        with self.s.tx() as conn:
            if alert.id == 0:
                new_id = conn.execute(insert(alert_life).values(**_row(alert))).inserted_primary_key
                assert new_id is not None
                return replace(alert, id=int(new_id[0]))
            conn.execute(update(alert_life).where(_L.id == alert.id).values(**_row(alert)))
        return alert

    def open_alerts(self) -> list[Alert]:
        """Firing and acknowledged alerts, oldest first."""
        q = select(alert_life).where(_L.state.in_(OPEN)).order_by(_L.fired_at, _L.id)
        with self.s.tx() as conn:
            return [_alert(r) for r in conn.execute(q)]

    def earliest(self) -> tuple[Any, Any]:
        """The earliest page due of a firing alert, the earliest firing of an open one."""
        pages = select(func.min(_L.next_page_at)).where(_L.state == "firing")
        fired = select(func.min(_L.fired_at)).where(_L.state.in_(OPEN))
        with self.s.tx() as conn:
            return conn.execute(pages).scalar(), conn.execute(fired).scalar()

    def latest(self, channels: Iterable[str] | None = None) -> Alert | None:
        """The newest open alert (of `channels`)."""
        q = select(alert_life).where(_L.state.in_(OPEN)).order_by(_L.fired_at.desc(), _L.id.desc()).limit(1)
        if channels is not None:
            q = q.where(_L.channel.in_(list(channels)))
        with self.s.tx() as conn:
            r = conn.execute(q).first()
        return _alert(r) if r is not None else None

    def since(self, start: Any) -> list[Alert]:
        """Alerts fired at or after `start`, oldest first."""
        q = select(alert_life).where(_L.fired_at >= start).order_by(_L.fired_at, _L.id)
        with self.s.tx() as conn:
            return [_alert(r) for r in conn.execute(q)]

    def claim_page(self, page: PageRow) -> bool:
        """Insert the page; False when (alert, step) is there already."""
        stmt = (
            self.s.insert(alert_page)
            .values(
                alert_id=page.alert_id,
                fired=page.fired,
                step=page.step,
                person=page.person,
                number=page.number,
                paged_at=page.paged_at,
                holder=page.holder,
            )
            .on_conflict_do_nothing(index_elements=["alert_id", "fired", "step"])
        )
        with self.s.tx() as conn:
            return bool(conn.execute(stmt).rowcount)

    def pages(self, alert_id: int) -> list[PageRow]:
        """The pages of one alert, in order."""
        q = select(alert_page).where(_P.alert_id == alert_id).order_by(_P.fired, _P.number)
        with self.s.tx() as conn:
            return [
                PageRow(
                    int(m["alert_id"]),
                    int(m["fired"]),
                    m["step"],
                    m["person"],
                    int(m["number"]),
                    m["paged_at"],
                    m["holder"],
                )
                for m in (r._mapping for r in conn.execute(q))
            ]
