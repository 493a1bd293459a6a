"""RateLimiter over table alert_robot: check-and-count under a row lock, one budget for all replicas."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from sqlalchemy import Connection, select, update

from xihe.agent.alert_tables import alert_robot
from xihe.agent.alerts.ratelimit import RateLimiter, next_free
from xihe.agent.alerts.sql.stores import SqlAlertStores


class SqlRateLimiter(RateLimiter):
    """WeCom's per-robot limit counted in table alert_robot, so all replicas share one budget."""

    def __init__(self, stores: SqlAlertStores, limit: int = 20, window: timedelta = timedelta(minutes=1)):
        super().__init__(limit, window)
        self.s = stores

    def _load(self, conn: Connection, robot: str, now: datetime, lock: bool) -> list[datetime]:
        if lock:  # a write first: the row lock (PostgreSQL) or the write lock (SQLite) is ours
            conn.execute(
                self.s.insert(alert_robot)
                .values(robot=robot, sent="[]", updated_at=now)
                .on_conflict_do_nothing(index_elements=["robot"])
            )
            if self.s.postgres:
                conn.execute(
                    select(alert_robot.c.robot).where(alert_robot.c.robot == robot).with_for_update()
                )
        raw = conn.execute(select(alert_robot.c.sent).where(alert_robot.c.robot == robot)).scalar()
        times = [datetime.fromisoformat(t) for t in json.loads(raw or "[]")]
        return [t for t in times if t > now - self.window]

    def next_free(self, robot: str, now: datetime, limit: int | None = None) -> datetime:
        """When the next attempt to `robot` may go out."""
        with self.s.tx() as conn:
            sent = self._load(conn, robot, now, lock=False)
        return next_free(sorted(sent), now, limit or self.limit, self.window)

    def _store(self, conn: Connection, robot: str, sent: list[datetime], now: datetime) -> None:
        conn.execute(
            update(alert_robot)
            .where(alert_robot.c.robot == robot)
            .values(sent=json.dumps([t.isoformat() for t in sorted(sent)]), updated_at=now)
        )

    def record(self, robot: str, now: datetime) -> None:
        """Count one attempt."""
        with self.s.tx() as conn:
            sent = self._load(conn, robot, now, lock=True)
            self._store(conn, robot, [*sent, now], now)

    def acquire(self, robot: str, now: datetime, limit: int | None = None) -> bool:
        """Check and count one attempt under the robot's row lock."""
        with self.s.tx() as conn:
            sent = self._load(conn, robot, now, lock=True)
            if next_free(sorted(sent), now, limit or self.limit, self.window) > now:
                return False
            self._store(conn, robot, [*sent, now], now)
        return True
