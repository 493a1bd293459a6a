"""Schedules taken offline from chat (`ds_schedule_off`), and the claim of their reminders.

`/schedule WORKFLOW off` records one row with when to remind; `/schedule WORKFLOW on` removes it. The
reminder job claims due rows with a conditional UPDATE (only one replica wins a row), so each
reminder goes out once even with several replicas.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, Engine, and_, delete, insert, select, update

from xihe.agent.dolphin_tables import ds_schedule_off


@dataclass(frozen=True)
class ScheduleOff:
    """A schedule someone took offline from chat."""

    project_code: int
    schedule_id: int
    project: str
    workflow: str
    definition_code: int
    conversation: str
    user: str
    off_at: datetime
    remind_at: datetime


class ScheduleOffStore:
    """ds_schedule_off rows."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def _key(self, project_code: int, schedule_id: int) -> ColumnElement[bool]:
        t = ds_schedule_off.c
        return and_(t.project_code == project_code, t.schedule_id == schedule_id)

    def off(self, row: ScheduleOff) -> None:
        """Record (or record again) that a schedule was taken offline."""
        with self.engine.begin() as conn:
            conn.execute(delete(ds_schedule_off).where(self._key(row.project_code, row.schedule_id)))
            conn.execute(insert(ds_schedule_off).values(**row.__dict__, reminded_at=None))

    def on(self, project_code: int, schedule_id: int) -> None:
        """The schedule is online again: nothing to remind."""
        with self.engine.begin() as conn:
            conn.execute(delete(ds_schedule_off).where(self._key(project_code, schedule_id)))

    def claim_due(self, now: datetime) -> list[ScheduleOff]:
        """Rows whose reminder is due and that this caller won (reminded_at set by it)."""
        t = ds_schedule_off.c
        with self.engine.begin() as conn:
            due = conn.execute(
                select(ds_schedule_off).where(t.reminded_at.is_(None), t.remind_at <= now)
            ).all()
            won: list[ScheduleOff] = []
            for r in due:
                m = dict(r._mapping)
                claimed = conn.execute(
                    update(ds_schedule_off)
                    .where(self._key(m["project_code"], m["schedule_id"]), t.reminded_at.is_(None))
                    .values(reminded_at=now)
                ).rowcount
                if claimed == 1:
                    m.pop("reminded_at")
                    won.append(ScheduleOff(**m))
        return won
