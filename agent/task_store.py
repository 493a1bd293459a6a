"""Tasks in SQL: the `task` rows, their leases (one replica works a task at a time), and their steps.

The step rows themselves are `xihe.agent.step_log.StepLog`, which `TaskStore` extends, so one store
object keeps a task and its step log.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

from sqlalchemy import Select, and_, bindparam, exists, insert, or_, select, true, update
from sqlalchemy.exc import CompileError

from xihe.agent import lease
from xihe.agent.core_tables import pending_action, task
from xihe.agent.errors import TaskStateError
from xihe.agent.holder import holder_is_dead
from xihe.agent.step_log import StepLog
from xihe.agent.tasks import Task, TaskStatus

FAILED_OUTCOMES = ("failed", "run FAILURE", "run KILL")


def outcome_filter(name: str) -> Any:
    """SQL condition for a status filter people use: `failed` also finds tasks whose action or run failed."""
    if name == "failed":
        return or_(task.c.status == TaskStatus.FAILED, task.c.outcome.in_(FAILED_OUTCOMES))
    if name == "refused":
        return task.c.outcome == "refused"
    return task.c.status == name


# statements of every turn, built once: building one and its cache key cost more than the query
_GET = select(task).where(task.c.id == bindparam("id"))
_RUNNABLE = or_(
    task.c.status == TaskStatus.RUNNING,
    and_(
        task.c.status == TaskStatus.AWAITING_CONFIRMATION,
        exists().where(
            and_(
                pending_action.c.task_id == task.c.id,
                pending_action.c.status == "confirmed",
                or_(pending_action.c.needs_approval.is_(False), pending_action.c.approved_by.is_not(None)),
            )
        ),
    ),
)  # left `running`, or left `awaiting_confirmation` although its action was confirmed (and approved)
_COLUMNS = frozenset(task.c.keys())
_CREATE = insert(task).returning(*task.c)  # the row as stored, without reading it again
_UPDATE = update(task).where(task.c.id == bindparam("task_id"))  # SET: the columns the parameters name
_UPDATE_FROM = _UPDATE.where(task.c.status.in_(bindparam("expect", expanding=True)))
_ORPHANS = select(task).where(_RUNNABLE).order_by(task.c.id).limit(bindparam("n"))
_ORPHANS_HERE = _ORPHANS.where(task.c.conversation == bindparam("conversation"))


@lru_cache(maxsize=32)
def _recent(filters: tuple[str, ...]) -> Select[Any]:
    """`recent`'s query for one set of filters (each a parameter of that name), built once."""
    q = select(task).order_by(task.c.id.desc()).limit(bindparam("limit"))
    for name in filters:
        q = q.where(
            task.c.created_at >= bindparam(name) if name == "since" else task.c[name] == bindparam(name)
        )
    return q


def task_of(row: Any) -> Task:
    """A `task` row as a Task."""
    values = {k: row._mapping[k] for k in Task.__dataclass_fields__}
    values["runs"] = tuple(values["runs"] or ())
    values["status"] = TaskStatus(values["status"])
    return Task(**values)


class TaskStore(StepLog):
    """Tasks and steps in SQL (SQLite or PostgreSQL)."""

    # ---- tasks
    def create(
        self,
        *,
        kind: str,
        owner: str,
        conversation: str,
        goal: str,
        now: datetime,
        channel: str = "cli",
        retry_budget: int = 0,
        status: TaskStatus = TaskStatus.RUNNING,
        lease_owner: str | None = None,
        lease_until: datetime | None = None,
    ) -> Task:
        """Insert a new task and return it."""
        with self.engine.begin() as conn:
            row = conn.execute(
                _CREATE,
                {
                    "kind": kind,
                    "status": status,
                    "owner": owner,
                    "conversation": conversation,
                    "channel": channel,
                    "goal": goal,
                    "retry_budget": retry_budget,
                    "lease_owner": lease_owner,
                    "lease_until": lease_until,
                    "schema_version": 1,
                    "created_at": now,
                    "updated_at": now,
                },
            ).one()
        return task_of(row)

    def get(self, task_id: int) -> Task:
        """The task, or TaskStateError naming the id."""
        with self.engine.connect() as conn:
            row = conn.execute(_GET, {"id": task_id}).first()
        if row is None:
            raise TaskStateError(f"task {task_id} does not exist")
        return task_of(row)

    def update(
        self, task_id: int, now: datetime, *, expect: tuple[str, ...] | None = None, **values: Any
    ) -> bool:
        """Set columns (status, current_step, reply, error, ...); with `expect`, only from those statuses."""
        unknown = values.keys() - _COLUMNS
        if unknown:  # as `update(task).values(...)` refused them
            raise CompileError(f"Unconsumed column names: {', '.join(sorted(unknown))}")
        q, params = (_UPDATE_FROM, {"expect": list(expect)}) if expect else (_UPDATE, {})
        with self.engine.begin() as conn:
            return conn.execute(q, {**params, **values, "updated_at": now, "task_id": task_id}).rowcount == 1

    def set_outcome(self, task_id: int, outcome: str | None, now: datetime) -> None:
        """What came of the task's last action or run (see `Task.shown_status`)."""
        with self.engine.begin() as conn:
            conn.execute(update(task).where(task.c.id == task_id).values(outcome=outcome, updated_at=now))

    def add_runs(self, task_id: int, ids: Sequence[int], now: datetime) -> list[int]:
        """Remember runs a step started, as soon as they are known (each once, in order); the new ones."""
        with self.engine.begin() as conn:
            row = conn.execute(select(task.c.runs).where(task.c.id == task_id)).first()
            if row is None:
                return []
            known = list(row[0] or [])
            new = [int(r) for r in ids if int(r) not in known]
            if new:
                conn.execute(
                    update(task).where(task.c.id == task_id).values(runs=known + new, updated_at=now)
                )
            return new

    def with_run(self, run_id: int, limit: int = 2000) -> list[Task]:
        """Tasks whose steps started run `run_id`, newest first (among the newest `limit` with runs)."""
        q = select(task).where(task.c.runs.is_not(None)).order_by(task.c.id.desc()).limit(limit)
        with self.engine.connect() as conn:
            return [t for t in map(task_of, conn.execute(q)) if run_id in t.runs]

    def recent(
        self,
        *,
        owner: str | None = None,
        conversation: str | None = None,
        status: str | None = None,
        kind: str | None = None,
        since: datetime | None = None,
        limit: int = 20,
    ) -> list[Task]:
        """Newest first."""
        given = {"owner": owner, "conversation": conversation, "status": status, "kind": kind, "since": since}
        params = {k: v for k, v in given.items() if v is not None}
        q = _recent(tuple(params))
        with self.engine.connect() as conn:
            return [task_of(r) for r in conn.execute(q, {**params, "limit": limit})]

    # ---- leases (`xihe.agent.lease`): one replica works a task at a time
    def claim(self, task_id: int, holder: str, now: datetime, ttl: timedelta) -> bool:
        """Take (or renew) the lease if it is free or already ours."""
        with self.engine.begin() as conn:
            return conn.execute(lease.claim(task, task.c.id == task_id, holder, now, ttl)).rowcount == 1

    def release(self, task_id: int, holder: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(lease.release(task, task.c.id == task_id, holder))

    def renew_all(self, holder: str, now: datetime, ttl: timedelta) -> int:
        """Extend every live lease `holder` has (it is alive, however long a step takes); how many."""
        with self.engine.begin() as conn:
            return int(conn.execute(lease.renew(task, true(), holder, now, ttl)).rowcount)

    def release_all(self, holder: str) -> int:
        """Give up every lease `holder` still has (shutdown), so another replica takes over at once."""
        with self.engine.begin() as conn:
            return int(conn.execute(lease.release(task, true(), holder)).rowcount)

    def orphans(self, now: datetime, limit: int = 50, *, conversation: str | None = None) -> list[Task]:
        """Tasks whose holder is gone (no lease, an expired one, or a dead local process) and that can go on.

        That is a task left `running`, or one left `awaiting_confirmation` although its action was
        confirmed (and approved where needed): the process died between the yes and the resume.
        """
        params: dict[str, Any] = {"n": limit * 4}
        q = _ORPHANS
        if conversation is not None:
            q, params["conversation"] = _ORPHANS_HERE, conversation
        with self.engine.connect() as conn:
            rows = [task_of(r) for r in conn.execute(q, params)]
        gone = [t for t in rows if not lease.is_held(t.lease_until, now) or holder_is_dead(t.lease_owner)]
        return gone[:limit]

    def take(self, orphan: Task, holder: str, now: datetime, ttl: timedelta) -> bool:
        """Compare-and-swap an orphan's lease from the holder we saw to `holder`: of two takers, one wins."""
        seen = (orphan.lease_owner, orphan.lease_until)
        row = and_(task.c.id == orphan.id, task.c.status == orphan.status)
        with self.engine.begin() as conn:
            return bool(conn.execute(lease.take_over(task, row, seen, holder, now, ttl)).rowcount)

    def spend_retry(self, task_id: int, now: datetime) -> int | None:
        """Spend one unit of the task's stored retry budget; None when it is exhausted."""
        with self.engine.begin() as conn:
            ok = conn.execute(
                update(task)
                .where(and_(task.c.id == task_id, task.c.retry_budget > 0))
                .values(retry_budget=task.c.retry_budget - 1, updated_at=now)
            ).rowcount
            if not ok:
                return None
            return int(conn.execute(select(task.c.retry_budget).where(task.c.id == task_id)).scalar_one())
