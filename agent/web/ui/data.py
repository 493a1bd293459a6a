"""What the pages show, as plain data read from the same stores chat and the CLI use.

Nothing here renders HTML or knows about requests. Alert data is read through the alerts feature's
SQL stores; a reader that cannot read (a database without the alert tables) returns None, "absent",
and the page says so instead of failing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import date, datetime, time, timedelta
from typing import Any, TypeVar
from zoneinfo import ZoneInfo

from sqlalchemy import Engine, Text, cast, func, or_, select
from sqlalchemy.exc import SQLAlchemyError

from xihe.agent.alerts.deliver import ChannelHealth
from xihe.agent.alerts.lifecycle import Alert
from xihe.agent.alerts.maintenance import MaintenanceBook
from xihe.agent.alerts.measures import Measure, measures, unacked_p0
from xihe.agent.alerts.model import PUSHED, Reason
from xihe.agent.alerts.sql.channel import SqlChannelHealth
from xihe.agent.alerts.sql.life import SqlLifeStore
from xihe.agent.alerts.sql.maintenance import SqlMaintenanceStore
from xihe.agent.alerts.sql.outbox import SqlOutbox
from xihe.agent.alerts.sql.records import SqlRecordSink
from xihe.agent.alerts.sql.stores import SqlAlertStores
from xihe.agent.core_tables import task
from xihe.agent.deps import Deps
from xihe.agent.task_store import outcome_filter, task_of
from xihe.agent.tasks import FINISHED, StepStatus, Task, TaskStep
from xihe.agent.timefmt import show
from xihe.config.alerts import ALERTS_SECTION

STATUSES = ("pending", "running", "awaiting_confirmation", "failed", "refused", "done", "cancelled")


def parse_when(text: str | None, tz: ZoneInfo, *, end_of_day: bool = False) -> datetime | None:
    """An ISO date or datetime from a form or the CLI; naive values are in `tz`. ValueError if bad."""
    text = (text or "").strip()
    if not text:
        return None
    if len(text) == 10:
        day = date.fromisoformat(text)
        value = datetime.combine(day, time.max if end_of_day else time.min)
    else:
        value = datetime.fromisoformat(text)
    if value.tzinfo is None:
        value = value.replace(tzinfo=tz)
    return value


# ---- tasks


@dataclass(frozen=True)
class TaskFilter:
    """The task list's filters (None = any)."""

    status: str | None = None
    owner: str | None = None
    kind: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    text: str | None = None  # anywhere in the goal or the last reply (any case); a number: the task or a run


def list_tasks(engine: Engine, f: TaskFilter, *, limit: int, offset: int = 0) -> list[Task]:
    """Newest first."""
    q = select(task).order_by(task.c.id.desc()).limit(limit).offset(offset)
    if f.status:
        q = q.where(outcome_filter(f.status))
    for col, val in ((task.c.owner, f.owner), (task.c.kind, f.kind)):
        if val:
            q = q.where(col == val)
    if f.since is not None:
        q = q.where(task.c.created_at >= f.since)
    if f.until is not None:
        q = q.where(task.c.created_at <= f.until)
    if f.text:
        needle = "%" + f.text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        q = q.where(
            or_(
                func.lower(task.c.goal).like(needle, escape="\\"),
                func.lower(task.c.reply).like(needle, escape="\\"),
                *_number_matches(f.text.strip().lstrip("#")),
            )
        )
    with engine.connect() as conn:
        return [task_of(r) for r in conn.execute(q)]


def _number_matches(text: str) -> list[Any]:
    """A number is also the task's id or a run it started (`runs` holds JSON like `[104, 105]`)."""
    if not (text.isascii() and text.isdigit()) or len(text) > 18:
        return []
    runs = cast(task.c.runs, Text)
    shapes = ("[{n}]", "[{n},%", "%,{n}]", "%,{n},%", "%, {n}]", "%, {n},%")
    return [task.c.id == int(text), *(runs.like(shape.format(n=text)) for shape in shapes)]


def task_kinds(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        return sorted(r[0] for r in conn.execute(select(task.c.kind).distinct()))


@dataclass
class Attempt:
    """One attempt of one step: its `running` row joined with its outcome row (if any)."""

    step_key: str
    attempt: int
    tool_name: str
    status: str  # running | done | failed | interrupted
    started_at: datetime
    finished_at: datetime | None
    duration_ms: int
    input_digest: str | None
    input_preview: str | None
    output_digest: str | None = None
    output_ref: str | None = None
    output_text: str | None = None
    error: str | None = None
    external_ids: dict[str, Any] | None = None
    row_ids: list[int] = field(default_factory=list)
    left: float = 0.0  # percent of the task's span, for the to-scale bar
    width: float = 0.0

    @property
    def kind(self) -> str:
        return self.step_key.split(":", 1)[0]


def timeline(steps: list[TaskStep], now: datetime, task_finished: bool) -> tuple[list[Attempt], int]:
    """Attempts in order with bar positions to scale, and the span in ms they are scaled to."""
    attempts: dict[tuple[str, int], Attempt] = {}
    for s in steps:
        key = (s.step_key, s.attempt)
        a = attempts.get(key)
        if a is None:
            a = attempts[key] = Attempt(
                s.step_key,
                s.attempt,
                s.tool_name,
                s.status,
                s.started_at,
                s.finished_at,
                s.duration_ms or 0,
                s.input_digest,
                s.input_preview,
            )
        a.row_ids.append(s.id)
        if s.status != StepStatus.RUNNING:
            a.status, a.finished_at = s.status, s.finished_at
            a.duration_ms = s.duration_ms or 0
            a.output_digest, a.output_ref, a.output_text = s.output_digest, s.output_ref, s.output_text
            a.error, a.external_ids = s.error, s.external_ids
    out = list(attempts.values())
    for a in out:
        if a.status == StepStatus.RUNNING:
            if task_finished:
                a.status = "interrupted"  # no outcome row: the process died mid-step
            else:
                a.duration_ms = max(0, int((now - a.started_at).total_seconds() * 1000))
    if not out:
        return out, 0
    t0 = min(a.started_at for a in out)
    t1 = max(a.started_at + timedelta(milliseconds=a.duration_ms) for a in out)
    span = max(1, int((t1 - t0).total_seconds() * 1000))
    for a in out:
        a.left = round(min(99.4, (a.started_at - t0).total_seconds() * 1000 / span * 100), 2)
        a.width = round(min(100 - a.left, max(0.6, a.duration_ms / span * 100)), 2)
    return out, span


def linked_ids(attempts: list[Attempt], audit_rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """External ids (DS instance ids, note ids ...) named by the task's steps and audit events."""
    found: dict[str, list[Any]] = {}
    sources = [a.external_ids for a in attempts] + [r.get("external_ids") for r in audit_rows]
    for ext in sources:
        for k, v in (ext or {}).items():
            for item in v if isinstance(v, list) else [v]:
                if item not in found.setdefault(k, []):
                    found[k].append(item)
    return found


def is_finished(t: Task) -> bool:
    return t.status in FINISHED


# ---- text for people


def _decode_nested(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _decode_nested(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode_nested(v) for v in value]
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return _decode_nested(json.loads(value))
        except ValueError:
            return value
    return value


def readable(text: str | None, indent: int | None = 2) -> str:
    """JSON text as people read it: characters instead of \\uXXXX escapes, JSON inside strings
    (a model's tool-call arguments) unpacked. Anything that is not JSON comes back unchanged."""
    if not text or text.lstrip()[:1] not in '{["':
        return text or ""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return json.dumps(_decode_nested(value), ensure_ascii=False, indent=indent, default=str)


# ---- alert data (the alerts feature's stores; None when this database cannot say)

T = TypeVar("T")
Rows = tuple[list[str], list[dict[str, Any]]]
OUTBOX_COLUMNS = ("created_at", "kind", "tier", "channel", "subject", "status", "attempts", "last_error",
                  "sent_at", "sent_via")  # fmt: skip


def _read(fn: Callable[[], T]) -> T | None:
    try:
        return fn()
    except SQLAlchemyError:
        return None


def alert_events(
    engine: Engine, *, limit: int, instance_ids: list[int] | None = None, reasons: list[str] | None = None
) -> Rows | None:
    """(columns, newest alert records) of these instances / reasons."""
    records = SqlRecordSink(SqlAlertStores(engine))
    rows = _read(lambda: records.recent(limit, reasons, instance_ids))
    return None if rows is None else (list(rows[0]) if rows else [], rows)


def alert_states(
    engine: Engine, *, since: datetime, limit: int, instance_ids: list[int] | None
) -> Rows | None:
    """(columns, alerts) that fired since `since` or are still open, newest first: their state, who
    acknowledged them, what resolved them (the alert lifecycle, table alert_life)."""
    life = SqlLifeStore(SqlAlertStores(engine))
    found = _read(lambda: {a.id: a for a in [*life.open_alerts(), *life.since(since)]})
    if found is None:
        return None
    alerts = sorted(found.values(), key=lambda a: (a.fired_at, a.id), reverse=True)
    if instance_ids is not None:
        alerts = [a for a in alerts if a.instance_id in instance_ids]
    rows = [
        {
            "alert": a.short,
            "state": a.state,
            "tier": a.tier.value,
            "workflow": a.workflow,
            "instance_id": a.instance_id,
            "fired_at": a.fired_at,
            "acked_by": a.acked_by,
            "acked_at": a.acked_at,
            "pages": a.pages,
            "resolved_at": a.resolved_at,
            "resolved_how": a.resolved_how,
            "resolved_by": a.resolved_by,
            "resolved_instance": a.resolved_instance or "",
        }
        for a in alerts[:limit]
    ]
    return (list(ALERT_STATE_COLUMNS), rows)


ALERT_STATE_COLUMNS = ("alert", "state", "tier", "workflow", "instance_id", "fired_at", "acked_by",
                       "acked_at", "pages", "resolved_at", "resolved_how", "resolved_by",
                       "resolved_instance")  # fmt: skip


def alert_measures(
    engine: Engine, *, since: datetime, instance_ids: list[int] | None
) -> list[Measure] | None:
    """Time to acknowledge and resolve per workflow and tier since `since` (agent.alerts.measures)."""
    life = SqlLifeStore(SqlAlertStores(engine))
    found = _read(lambda: life.since(since))
    if found is None:
        return None
    return measures(a for a in found if instance_ids is None or a.instance_id in instance_ids)


def unacked_p0_alerts(engine: Engine, instance_ids: list[int] | None) -> list[Alert]:
    """P0 alerts firing right now that nobody acknowledged."""
    found = _read(lambda: SqlLifeStore(SqlAlertStores(engine)).open_alerts()) or []
    return [a for a in unacked_p0(found) if instance_ids is None or a.instance_id in instance_ids]


def outbox_rows(engine: Engine, *, limit: int) -> Rows | None:
    """(columns, newest outbox rows)."""
    found = _read(lambda: SqlOutbox(SqlAlertStores(engine)).recent(limit))
    if found is None:
        return None
    return list(OUTBOX_COLUMNS), [{c: asdict(r)[c] for c in OUTBOX_COLUMNS} for r in found]


def channel_health(engine: Engine) -> dict[str, ChannelHealth] | None:
    """Recorded health per channel, most recently changed first."""
    return _read(lambda: SqlChannelHealth(SqlAlertStores(engine)).all())


# alert_event.reason values (agent.alerts.model.Reason): what was recorded but not pushed, and why.
SUPPRESSED_REASONS = frozenset(
    r.value
    for r in (
        Reason.RETRY_PENDING,
        Reason.FAILOVER_PENDING,
        Reason.USER_STOP,
        Reason.USER_PAUSE,
        Reason.PARENT_STOPPED,
        Reason.MAINTENANCE,
        Reason.NOT_FAILED,
        Reason.KILLED,
        Reason.IN_PROGRESS,
        Reason.BAD_EVENT,
        Reason.DUPLICATE_EVENT,
    )
)
FOLDED_REASONS = frozenset(
    r.value
    for r in (
        Reason.JOINED_INSTANCE,
        Reason.INSTANCE_ALREADY_NOTIFIED,
        Reason.FINGERPRINT_REPEAT,
        Reason.AGGREGATED_P2,
        Reason.NODE_STORM,
    )
)
PUSHED_REASONS = frozenset(r.value for r in PUSHED)


def verdict(row: dict[str, Any]) -> str:
    """One word for an alert_event row: pushed, suppressed, folded, sent, send failed (or '')."""
    reason = str(row.get("reason") or "")
    if reason == "sent":
        return "sent"
    if reason == "send_failed":
        return "send failed"
    if reason in SUPPRESSED_REASONS:
        return "suppressed"
    if reason in FOLDED_REASONS:
        return "folded"
    if reason in PUSHED_REASONS:
        return "pushed"
    return ""


def is_suppressed(row: dict[str, Any]) -> bool:
    """Recorded, not pushed on its own (suppressed or folded), or a failed delivery: highlighted."""
    return verdict(row) in ("suppressed", "folded", "send failed")


@dataclass(frozen=True)
class MaintRow:
    name: str
    when: str
    scope: str
    source: str
    active: bool


def maintenance_rows(deps: Deps, now: datetime) -> list[MaintRow]:
    """Windows from alerts.yaml (cron and fixed) plus chat-created ones from `alert_maintenance`."""
    cfg = deps.settings.get(ALERTS_SECTION)
    tz = deps.settings.core.timezone
    rows: list[MaintRow] = []
    if cfg is not None:
        cron_active = {s.name: s.active(now) for s in MaintenanceBook.from_config(cfg).schedules}
        for m in cfg.maintenance:
            scope = "all" if m.scope.kind == "all" else f"{m.scope.kind}:{m.scope.value}"
            if m.cron:
                when = f"cron '{m.cron}' for {m.duration_minutes} min ({cfg.timezone})"
                rows.append(MaintRow(m.name, when, scope, "alerts.yaml", cron_active.get(m.name, False)))
            elif m.start is not None and m.end is not None:
                when = f"{show(m.start, tz, seconds=False)} → {show(m.end, tz, seconds=False)}"
                rows.append(MaintRow(m.name, when, scope, "alerts.yaml", m.start <= now < m.end))
    stored = _read(lambda: SqlMaintenanceStore(SqlAlertStores(deps.engine)).history(100)) or []
    for w, closed, closed_by in stored:
        active = w.start <= now < w.end and not closed
        scope = f"{w.scope.kind}:{w.scope.value}".rstrip(":")
        when = f"{_fmt(w.start, tz)} → {_fmt(w.end, tz)}"
        if closed:
            when += f" (closed {_fmt(closed, tz)} by {closed_by or '-'})"
        by = f" by {w.created_by}" if w.created_by else ""
        rows.append(MaintRow(w.note or w.id, when, scope, f"{w.source or 'chat'}{by}", active))
    return rows


def _fmt(value: datetime, tz: str) -> str:
    return show(value, tz, seconds=False)
