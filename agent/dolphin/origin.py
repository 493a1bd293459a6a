"""Who started a run, when the bot did: the ds_watch row that followed the instance, its task's
owner, and the approver of the start (pending_action). Read only when an instance alert is rendered."""

from __future__ import annotations

import json

from sqlalchemy import Engine, select

from xihe.agent.alerts.notes import RunOrigin
from xihe.agent.core_tables import pending_action, task
from xihe.tools.dolphin.store import SqlWatchStore


def _dated(args_json: str | None) -> bool:
    """A start with `dates` is a backfill (a complement run over those dates)."""
    try:
        args = json.loads(args_json or "{}")
    except ValueError:
        return False
    return isinstance(args, dict) and bool(args.get("dates"))


class SqlRunOrigins:
    """`Origins` over the bot's own tables."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.watches = SqlWatchStore(engine)

    def find(self, instance_id: int) -> RunOrigin | None:
        """The origin of `instance_id`, or None when no watch of the bot followed it."""
        w = self.watches.with_instance(instance_id)
        if w is None:
            return None
        if not w.task_id.isdigit():
            return RunOrigin(w.task_id, "?", backfill=w.expected_runs > 1, project_code=w.project_code)
        task_id = int(w.task_id)
        with self.engine.connect() as conn:
            owner = conn.execute(select(task.c.owner).where(task.c.id == task_id)).scalar() or ""
            row = conn.execute(
                select(pending_action.c.approved_by, pending_action.c.user_id, pending_action.c.args_json)
                .where(pending_action.c.task_id == task_id)
                .order_by(pending_action.c.id.desc())
                .limit(1)
            ).first()
        return RunOrigin(
            task_id=w.task_id,
            started_by=(row.user_id if row is not None else "") or owner or "?",
            approved_by=(row.approved_by or "") if row is not None else "",
            backfill=w.expected_runs > 1 or (row is not None and _dated(row.args_json)),
            project_code=w.project_code,
        )
