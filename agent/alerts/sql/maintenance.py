"""MaintenanceStore over table alert_maintenance: numbered windows, closed once, expiry audited once."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, select, update

from xihe.agent.alert_tables import alert_maintenance
from xihe.agent.alerts.maintenance import MaintenanceWindow, MaintScope
from xihe.agent.alerts.sql.stores import SqlAlertStores

_M = alert_maintenance.c


def _window(r: Any) -> MaintenanceWindow:
    m = r._mapping
    return MaintenanceWindow(
        m["window_id"],
        m["start_at"],
        m["end_at"],
        MaintScope(m["scope_kind"], m["scope_value"] or ""),
        m["source"],
        m["created_by"] or "",
        m["note"] or "",
    )


class SqlMaintenanceStore:
    """MaintenanceStore over table alert_maintenance; each window also has a number for /maint."""

    def __init__(self, stores: SqlAlertStores) -> None:
        self.s = stores

    def save(self, window: MaintenanceWindow) -> None:
        """Insert or replace the window with this id."""
        values = {
            "window_id": window.id,
            "start_at": window.start,
            "end_at": window.end,
            "scope_kind": window.scope.kind,
            "scope_value": window.scope.value,
            "source": window.source,
            "created_by": window.created_by,
            "note": window.note,
        }
        stmt = self.s.insert(alert_maintenance).values(**values)
        stmt = stmt.on_conflict_do_update(
            index_elements=["window_id"], set_={k: stmt.excluded[k] for k in values if k != "window_id"}
        )
        with self.s.tx() as conn:
            conn.execute(stmt)

    def delete(self, window_id: str) -> None:
        """Remove the window; a missing id is not an error."""
        with self.s.tx() as conn:
            conn.execute(delete(alert_maintenance).where(_M.window_id == window_id))

    def load(self, since: datetime | None = None) -> list[MaintenanceWindow]:
        """Stored windows (only those ending after `since`, when given)."""
        q = select(alert_maintenance).order_by(_M.id)
        if since is not None:
            q = q.where(_M.end_at > since)
        with self.s.tx() as conn:
            return [_window(r) for r in conn.execute(q)]

    def history(self, limit: int) -> list[tuple[MaintenanceWindow, datetime | None, str]]:
        """(window, closed_at, closed_by), newest first, ended ones included (the web pages)."""
        with self.s.tx() as conn:
            rows = conn.execute(select(alert_maintenance).order_by(_M.id.desc()).limit(limit)).all()
        return [(_window(r), r._mapping["closed_at"], r._mapping["closed_by"] or "") for r in rows]

    def numbered(self, now: datetime) -> list[tuple[int, MaintenanceWindow]]:
        """(number, window) of windows not yet ended at `now`."""
        with self.s.tx() as conn:
            rows = conn.execute(select(alert_maintenance).where(_M.end_at > now).order_by(_M.id)).all()
        return [(int(r._mapping["id"]), _window(r)) for r in rows]

    def number_of(self, window_id: str) -> int | None:
        """The number of a stored window."""
        with self.s.tx() as conn:
            n = conn.execute(select(_M.id).where(_M.window_id == window_id)).scalar()
        return int(n) if n is not None else None

    def close(self, window_ids: list[str], now: datetime, by: str) -> list[str]:
        """End open windows now; returns the ids this call closed (a second close is a no-op)."""
        closed = []
        with self.s.tx() as conn:
            for wid in window_ids:
                n = conn.execute(
                    update(alert_maintenance)
                    .where(_M.window_id == wid, _M.closed_at.is_(None), _M.end_at > now)
                    .values(end_at=now, closed_at=now, closed_by=by)
                ).rowcount
                if n == 1:
                    closed.append(wid)
        return closed

    def expire_due(self, now: datetime) -> list[tuple[int, MaintenanceWindow]]:
        """Mark windows that ran out as expired, exactly once across replicas; returns them."""
        with self.s.tx() as conn:
            rows = conn.execute(
                update(alert_maintenance)
                .where(_M.closed_at.is_(None), _M.end_at <= now)
                .values(closed_at=_M.end_at, closed_by="expired")
                .returning(*alert_maintenance.c)
            ).all()
        return [(int(r._mapping["id"]), _window(r)) for r in rows]
