"""The step log: `task_step` rows, appended and never updated.

A step attempt writes a `running` row before its side effect and a `done`/`failed` row after; a call
that never ran (invalid, denied, refused) gets only its outcome row. A tool step's outcome also
updates what people read about its task (`task.outcome`, `task.runs`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, and_, bindparam, func, insert, or_, select, update

from xihe.agent.audit import AuditEvent
from xihe.agent.audit import write as write_audit
from xihe.agent.core_tables import task, task_step
from xihe.agent.errors import TaskStateError
from xihe.agent.prepared import Prepared
from xihe.agent.tasks import StepStatus, TaskStep, run_ids

# Statements built once, executed with parameters: the step path is the hot path of every tool call
# (the `Prepared` ones skip `Connection.execute`'s per-call work; see agent/prepared.py).
_INSERT_STEP = insert(task_step).returning(task_step.c.id)
_INSERT_STEP_FAST = Prepared(_INSERT_STEP)
_NEXT_ATTEMPT = select(func.coalesce(func.max(task_step.c.attempt), 0) + 1).where(
    and_(task_step.c.task_id == bindparam("t"), task_step.c.step_key == bindparam("k"))
)
_SET_CURRENT = (
    update(task)
    .where(task.c.id == bindparam("t"))
    .values(current_step=bindparam("k"), updated_at=bindparam("now"))
)


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


_READ_OUTCOME = select(task.c.outcome, task.c.runs).where(task.c.id == bindparam("t"))
_SET_OUTCOME = update(task).where(task.c.id == bindparam("t")).values(outcome=bindparam("o"))
# A step that went through clears a failed/refused outcome; in one statement that changes no row
# (and reads none back) in the usual case of a task whose outcome is not set. Two comparisons, not
# `in_`: an IN list is an expanding parameter, re-rendered on every execution.
_CLEAR_FAILED = (
    update(task)
    .where(and_(task.c.id == bindparam("t"), or_(task.c.outcome == "failed", task.c.outcome == "refused")))
    .values(outcome=None)
)
_SET_CURRENT_FAST, _SET_OUTCOME_FAST, _CLEAR_FAILED_FAST = map(
    Prepared, (_SET_CURRENT, _SET_OUTCOME, _CLEAR_FAILED)
)


def _note_outcome(
    conn: Connection, task_id: int, status: str, outcome: str | None, external_ids: dict[str, Any] | None
) -> None:
    found = run_ids(external_ids)
    if not found:  # the usual tool step: one UPDATE, nothing read
        if status == StepStatus.FAILED:
            _SET_OUTCOME_FAST.run(conn, {"t": task_id, "o": outcome or "failed"})
        else:
            _CLEAR_FAILED_FAST.run(conn, {"t": task_id})
        return
    row = conn.execute(_READ_OUTCOME, {"t": task_id}).first()
    if row is None:
        return
    values: dict[str, Any] = {}
    if status == StepStatus.FAILED:
        values["outcome"] = outcome or "failed"
    elif row.outcome in ("failed", "refused"):
        values["outcome"] = None  # the action went through after all; a run's outcome stays
    known = list(row.runs or [])
    new = [r for r in found if r not in known]
    if new:
        values["runs"] = known + new
    if values:
        conn.execute(update(task).where(task.c.id == task_id).values(**values))


_STEPS = select(task_step).where(task_step.c.task_id == bindparam("t")).order_by(task_step.c.id)


def _step(row: Any) -> TaskStep:
    values = {k: row._mapping[k] for k in TaskStep.__dataclass_fields__}
    values["status"] = StepStatus(values["status"])
    return TaskStep(**values)


class StepLog:
    """A task's steps in SQL (SQLite or PostgreSQL)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def steps(self, task_id: int) -> list[TaskStep]:
        """Every row, oldest first."""
        with self.engine.connect() as conn:
            rows = conn.execute(_STEPS, {"t": task_id})
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
            step_id = _INSERT_STEP_FAST.run(conn, values, insert=True)
            _SET_CURRENT_FAST.run(conn, {"t": task_id, "k": step_key, "now": now})
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
            step_id = _INSERT_STEP_FAST.run(conn, values, insert=True)
            if audit is not None:
                write_audit(conn, audit)
            if begun.step_key.startswith("tool:"):
                _note_outcome(conn, begun.task_id, status, outcome, external_ids)
        return TaskStep(id=step_id, **values)  # type: ignore[arg-type]
