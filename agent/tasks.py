"""Durable tasks and their append-only steps.

`task` answers "where is it now"; `task_step` answers "what happened at each step". A step attempt
writes a `running` row before its side effect and a `done`/`failed` row after; nothing is updated
in place, so a rerun never hides why the previous attempt failed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from sqlalchemy import Connection, Engine, and_, bindparam, exists, func, insert, or_, select, update

from xihe.agent.audit import AuditEvent
from xihe.agent.audit import write as write_audit
from xihe.agent.errors import TaskStateError
from xihe.agent.holder import holder_is_dead
from xihe.agent.schema import pending_action, task, task_step


class TaskStatus(StrEnum):
    """Where a task is (the `task.status` column holds these values)."""

    PENDING = "pending"
    RUNNING = "running"
    AWAITING_CONFIRMATION = "awaiting_confirmation"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


class StepStatus(StrEnum):
    """A `task_step` row: an attempt starting (`running`) or its outcome."""

    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


ACTIVE = (TaskStatus.PENDING, TaskStatus.RUNNING, TaskStatus.AWAITING_CONFIRMATION)
FINISHED = (TaskStatus.DONE, TaskStatus.FAILED, TaskStatus.CANCELLED)

# Statements built once, executed with parameters: the step path is the hot path of every tool call.
_INSERT_STEP = insert(task_step).returning(task_step.c.id)
_NEXT_ATTEMPT = select(func.coalesce(func.max(task_step.c.attempt), 0) + 1).where(
    and_(task_step.c.task_id == bindparam("t"), task_step.c.step_key == bindparam("k"))
)
_SET_CURRENT = (
    update(task)
    .where(task.c.id == bindparam("t"))
    .values(current_step=bindparam("k"), updated_at=bindparam("now"))
)


@dataclass(frozen=True)
class Task:
    """A unit of work started by one message or command."""

    id: int
    kind: str
    status: TaskStatus
    current_step: str | None
    owner: str
    conversation: str
    channel: str
    goal: str
    reply: str | None
    error: str | None
    lease_owner: str | None
    lease_expires_at: datetime | None
    retry_budget: int
    created_at: datetime
    updated_at: datetime
    outcome: str | None = None  # refused | failed | run FAILURE | run SUCCESS ... (see `shown_status`)
    runs: tuple[int, ...] = ()  # runs its steps started (DolphinScheduler instance ids)

    @property
    def shown_status(self) -> str:
        """What people read: the lifecycle status, and what came of it when that matters.

        `done · refused`, `done · failed`, `done · run FAILURE`; a plain `done` only when the
        last action ran and (for a followed run) the run succeeded.
        """
        if self.outcome and self.outcome != "run SUCCESS":
            return f"{self.status} · {self.outcome}" if self.status != TaskStatus.FAILED else "failed"
        return self.status


FAILED_OUTCOMES = ("failed", "run FAILURE", "run KILL")


def outcome_filter(name: str) -> Any:
    """SQL condition for a status filter people use: `failed` also finds tasks whose action or run failed."""
    if name == "failed":
        return or_(task.c.status == TaskStatus.FAILED, task.c.outcome.in_(FAILED_OUTCOMES))
    if name == "refused":
        return task.c.outcome == "refused"
    return task.c.status == name


@dataclass(frozen=True)
class TaskStep:
    """One row of the step log: an attempt starting (`running`) or its outcome."""

    id: int
    task_id: int
    step_key: str
    attempt: int
    status: StepStatus
    tool_name: str
    idempotency_key: str
    input_digest: str | None
    input_preview: str | None
    output_digest: str | None
    output_ref: str | None
    output_text: str | None
    error: str | None
    external_ids: dict[str, Any] | None
    started_at: datetime
    finished_at: datetime | None
    duration_ms: int | None


def _attempt_row(
    task_id: int,
    step_key: str,
    attempt: int,
    tool_name: str,
    now: datetime,
    input_digest: str | None,
    input_preview: str | None,
) -> dict[str, Any]:
    """The columns of a new attempt's `running` row."""
    return dict(
        task_id=task_id,
        step_key=step_key,
        attempt=attempt,
        status=StepStatus.RUNNING,
        tool_name=tool_name,
        idempotency_key=f"{task_id}:{step_key}",
        input_digest=input_digest,
        input_preview=input_preview,
        output_digest=None,
        output_ref=None,
        output_text=None,
        error=None,
        external_ids=None,
        started_at=now,
        finished_at=None,
        duration_ms=None,
    )


def run_ids(external_ids: dict[str, Any] | None) -> list[int]:
    """Run ids named by a step's external ids (`instance_id`, `instance_ids`)."""
    found: list[int] = []
    for key, value in (external_ids or {}).items():
        if "instance" in key:
            for item in value if isinstance(value, list | tuple) else [value]:
                if isinstance(item, int) or (isinstance(item, str) and item.isdigit()):
                    found.append(int(item))
    return found


def _note_outcome(
    conn: Connection, task_id: int, status: str, outcome: str | None, external_ids: dict[str, Any] | None
) -> None:
    row = conn.execute(select(task.c.outcome, task.c.runs).where(task.c.id == task_id)).first()
    if row is None:
        return
    values: dict[str, Any] = {}
    if status == StepStatus.FAILED:
        values["outcome"] = outcome or "failed"
    elif row.outcome in ("failed", "refused"):
        values["outcome"] = None  # the action went through after all; a run's outcome stays
    known = list(row.runs or [])
    new = [r for r in run_ids(external_ids) if r not in known]
    if new:
        values["runs"] = known + new
    if values:
        conn.execute(update(task).where(task.c.id == task_id).values(**values))


def task_of(row: Any) -> Task:
    """A `task` row as a Task."""
    values = {k: row._mapping[k] for k in Task.__dataclass_fields__}
    values["runs"] = tuple(values["runs"] or ())
    values["status"] = TaskStatus(values["status"])
    return Task(**values)


def _step(row: Any) -> TaskStep:
    values = {k: row._mapping[k] for k in TaskStep.__dataclass_fields__}
    values["status"] = StepStatus(values["status"])
    return TaskStep(**values)


class TaskStore:
    """Tasks and steps in SQL (SQLite or PostgreSQL)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

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
            new_id = conn.execute(
                insert(task)
                .values(
                    kind=kind,
                    status=status,
                    owner=owner,
                    conversation=conversation,
                    channel=channel,
                    goal=goal,
                    retry_budget=retry_budget,
                    lease_owner=lease_owner,
                    lease_expires_at=lease_until,
                    schema_version=1,
                    created_at=now,
                    updated_at=now,
                )
                .returning(task.c.id)
            ).scalar_one()
        return self.get(new_id)

    def get(self, task_id: int) -> Task:
        """The task, or TaskStateError naming the id."""
        with self.engine.connect() as conn:
            row = conn.execute(select(task).where(task.c.id == task_id)).first()
        if row is None:
            raise TaskStateError(f"task {task_id} does not exist")
        return task_of(row)

    def update(
        self, task_id: int, now: datetime, *, expect: tuple[str, ...] | None = None, **values: Any
    ) -> bool:
        """Set columns (status, current_step, reply, error, ...); with `expect`, only from those statuses."""
        q = update(task).where(task.c.id == task_id)
        if expect:
            q = q.where(task.c.status.in_(expect))
        with self.engine.begin() as conn:
            return conn.execute(q.values(updated_at=now, **values)).rowcount == 1

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
        q = select(task).order_by(task.c.id.desc()).limit(limit)
        for col, val in (
            (task.c.owner, owner),
            (task.c.conversation, conversation),
            (task.c.status, status),
            (task.c.kind, kind),
        ):
            if val is not None:
                q = q.where(col == val)
        if since is not None:
            q = q.where(task.c.created_at >= since)
        with self.engine.connect() as conn:
            return [task_of(r) for r in conn.execute(q)]

    # ---- leases: one replica works a task at a time
    def claim(self, task_id: int, holder: str, now: datetime, ttl: timedelta) -> bool:
        """Take (or renew) the lease if it is free, expired or already ours."""
        free = or_(task.c.lease_owner.is_(None), task.c.lease_expires_at < now, task.c.lease_owner == holder)
        with self.engine.begin() as conn:
            return (
                conn.execute(
                    update(task)
                    .where(and_(task.c.id == task_id, free))
                    .values(lease_owner=holder, lease_expires_at=now + ttl)
                ).rowcount
                == 1
            )

    def release(self, task_id: int, holder: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(
                update(task)
                .where(and_(task.c.id == task_id, task.c.lease_owner == holder))
                .values(lease_owner=None, lease_expires_at=None)
            )

    def renew_all(self, holder: str, now: datetime, ttl: timedelta) -> int:
        """Extend every live lease `holder` has (it is alive, however long a step takes); how many."""
        live = and_(task.c.lease_owner == holder, task.c.lease_expires_at >= now)
        with self.engine.begin() as conn:
            return int(conn.execute(update(task).where(live).values(lease_expires_at=now + ttl)).rowcount)

    def release_all(self, holder: str) -> int:
        """Give up every lease `holder` still has (shutdown), so another replica takes over at once."""
        with self.engine.begin() as conn:
            return int(
                conn.execute(
                    update(task)
                    .where(task.c.lease_owner == holder)
                    .values(lease_owner=None, lease_expires_at=None)
                ).rowcount
            )

    def orphans(self, now: datetime, limit: int = 50, *, conversation: str | None = None) -> list[Task]:
        """Tasks whose holder is gone (no lease, an expired one, or a dead local process) and that can go on.

        That is a task left `running`, or one left `awaiting_confirmation` although its action was
        confirmed (and approved where needed): the process died between the yes and the resume.
        """
        pa = pending_action.c
        released = exists().where(
            and_(
                pa.task_id == task.c.id,
                pa.status == "confirmed",
                or_(pa.needs_approval.is_(False), pa.approved_by.is_not(None)),
            )
        )
        q = (
            select(task)
            .where(
                or_(
                    task.c.status == TaskStatus.RUNNING,
                    and_(task.c.status == TaskStatus.AWAITING_CONFIRMATION, released),
                )
            )
            .order_by(task.c.id)
            .limit(limit * 4)
        )
        if conversation is not None:
            q = q.where(task.c.conversation == conversation)
        with self.engine.connect() as conn:
            rows = [task_of(r) for r in conn.execute(q)]
        gone = [
            t
            for t in rows
            if t.lease_owner is None
            or (t.lease_expires_at and t.lease_expires_at < now)
            or holder_is_dead(t.lease_owner)
        ]
        return gone[:limit]

    def take(self, orphan: Task, holder: str, now: datetime, ttl: timedelta) -> bool:
        """Compare-and-swap an orphan's lease from the holder we saw to `holder`: of two takers, one wins."""
        same_owner = (
            task.c.lease_owner.is_(None)
            if orphan.lease_owner is None
            else task.c.lease_owner == orphan.lease_owner
        )
        same_expiry = (
            task.c.lease_expires_at.is_(None)
            if orphan.lease_expires_at is None
            else task.c.lease_expires_at == orphan.lease_expires_at
        )
        with self.engine.begin() as conn:
            return bool(
                conn.execute(
                    update(task)
                    .where(
                        and_(task.c.id == orphan.id, task.c.status == orphan.status, same_owner, same_expiry)
                    )
                    .values(lease_owner=holder, lease_expires_at=now + ttl)
                ).rowcount
            )

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

    # ---- steps
    def steps(self, task_id: int) -> list[TaskStep]:
        """Every row, oldest first."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(task_step).where(task_step.c.task_id == task_id).order_by(task_step.c.id)
            )
            return [_step(r) for r in rows]

    def latest(self, task_id: int) -> dict[str, TaskStep]:
        """The latest row of each step key."""
        out: dict[str, TaskStep] = {}
        for s in self.steps(task_id):
            out[s.step_key] = s
        return out

    def begin_step(
        self,
        task_id: int,
        step_key: str,
        tool_name: str,
        now: datetime,
        *,
        input_digest: str | None = None,
        input_preview: str | None = None,
        attempt: int | None = None,
    ) -> TaskStep:
        """Append a `running` row (a new attempt) and move the task's current_step to it.

        `attempt` may be given when the caller already read the step's latest row (saves a query).
        """
        with self.engine.begin() as conn:
            if attempt is None:
                attempt = int(conn.execute(_NEXT_ATTEMPT, {"t": task_id, "k": step_key}).scalar_one())
            values = _attempt_row(task_id, step_key, attempt, tool_name, now, input_digest, input_preview)
            step_id = conn.execute(_INSERT_STEP, values).scalar_one()
            conn.execute(_SET_CURRENT, {"t": task_id, "k": step_key, "now": now})
        return TaskStep(id=step_id, **values)

    def record(
        self,
        task_id: int,
        step_key: str,
        tool_name: str,
        status: StepStatus,
        now: datetime,
        *,
        input_digest: str | None = None,
        input_preview: str | None = None,
        output_text: str | None = None,
        error: str | None = None,
        audit: AuditEvent | None = None,
        outcome: str | None = None,
    ) -> TaskStep:
        """Append an outcome for a call that never ran (invalid, denied, refused): no `running` row."""
        with self.engine.connect() as conn:
            attempt = int(conn.execute(_NEXT_ATTEMPT, {"t": task_id, "k": step_key}).scalar_one())
        row = _attempt_row(task_id, step_key, attempt, tool_name, now, input_digest, input_preview)
        begun = TaskStep(id=0, **row)
        return self.finish_step(
            begun, status, now, output_text=output_text, error=error, audit=audit, outcome=outcome
        )

    def finish_step(
        self,
        begun: TaskStep,
        status: StepStatus,
        now: datetime,
        *,
        output_digest: str | None = None,
        output_ref: str | None = None,
        output_text: str | None = None,
        error: str | None = None,
        external_ids: dict[str, Any] | None = None,
        audit: AuditEvent | None = None,
        outcome: str | None = None,
    ) -> TaskStep:
        """Append the outcome row of an attempt (and its audit event, in the same transaction).

        A tool step also updates what people read about the task: a failed one marks it `failed`
        (or `outcome`, e.g. `refused`), a done one clears that again; runs it started are remembered.
        """
        if status not in (StepStatus.DONE, StepStatus.FAILED):
            raise TaskStateError(f"a step outcome is done or failed, not {status!r}")
        status = StepStatus(status)
        duration = int((now - begun.started_at).total_seconds() * 1000)
        values = dict(
            task_id=begun.task_id,
            step_key=begun.step_key,
            attempt=begun.attempt,
            status=status,
            tool_name=begun.tool_name,
            idempotency_key=begun.idempotency_key,
            input_digest=begun.input_digest,
            input_preview=begun.input_preview,
            output_digest=output_digest,
            output_ref=output_ref,
            output_text=output_text,
            error=error,
            external_ids=external_ids,
            started_at=begun.started_at,
            finished_at=now,
            duration_ms=duration,
        )
        with self.engine.begin() as conn:
            step_id = conn.execute(_INSERT_STEP, values).scalar_one()
            if audit is not None:
                write_audit(conn, audit)
            if begun.step_key.startswith("tool:"):
                _note_outcome(conn, begun.task_id, status, outcome, external_ids)
        return TaskStep(id=step_id, **values)  # type: ignore[arg-type]
