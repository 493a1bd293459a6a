"""What the pages show, as plain data read from the same stores chat and the CLI use.

Nothing here renders HTML or knows about requests. The alert tables belong to the alerts feature
and may not exist (or may have other columns) on a given bot, so they are read by reflection and
every reader returns "absent" instead of failing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import Engine, MetaData, Table, func, inspect, or_, select
from sqlalchemy.exc import SQLAlchemyError

from xihe.agent.alerts.model import PUSHED, Reason
from xihe.agent.deps import Deps
from xihe.agent.schema import metadata, task
from xihe.agent.tasks import FINISHED, Task, TaskStep, outcome_filter, task_of
from xihe.agent.timefmt import show

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
    text: str | None = None  # anywhere in the goal or the last reply, case-insensitive


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
            )
        )
    with engine.connect() as conn:
        return [task_of(r) for r in conn.execute(q)]


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
        if s.status != "running":
            a.status, a.finished_at = s.status, s.finished_at
            a.duration_ms = s.duration_ms or 0
            a.output_digest, a.output_ref, a.output_text = s.output_digest, s.output_ref, s.output_text
            a.error, a.external_ids = s.error, s.external_ids
    out = list(attempts.values())
    for a in out:
        if a.status == "running":
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


# ---- alert tables (owned by the alerts feature; may be absent)


def _aware(value: Any) -> Any:
    """Reflected SQLite timestamps come back naive; the store writes UTC."""
    if isinstance(value, datetime) and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


def optional_table(engine: Engine, name: str) -> Table | None:
    """The schema's table (or a reflected one), or None when it does not exist (yet) on this database."""
    try:
        if not inspect(engine).has_table(name):
            return None
        known = metadata.tables.get(name)
        if known is not None:
            return known
        md = MetaData()
        return Table(name, md, autoload_with=engine)
    except SQLAlchemyError:
        return None


def recent_rows(
    engine: Engine, name: str, *, limit: int = 50, where: dict[str, list[Any]] | None = None
) -> tuple[list[str], list[dict[str, Any]]] | None:
    """(columns, newest rows) of an optional table; None when the table is absent or unreadable."""
    t = optional_table(engine, name)
    if t is None:
        return None
    order = next((t.c[c] for c in ("id", "at", "created_at", "updated_at", "due_at") if c in t.c), None)
    q = select(t).limit(limit)
    if order is not None:
        q = q.order_by(order.desc())
    for col, values in (where or {}).items():
        if col not in t.c:
            return list(t.c.keys()), []
        q = q.where(t.c[col].in_(values))
    try:
        with engine.connect() as conn:
            rows = [{k: _aware(v) for k, v in r._mapping.items()} for r in conn.execute(q)]
    except SQLAlchemyError:
        return None
    return list(t.c.keys()), rows


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


def pick(columns: list[str], preferred: tuple[str, ...]) -> list[str]:
    """The preferred columns that exist, in that order (all columns when none of them do)."""
    chosen = [c for c in preferred if c in columns]
    return chosen or columns


@dataclass(frozen=True)
class MaintRow:
    name: str
    when: str
    scope: str
    source: str
    active: bool


def maintenance_rows(deps: Deps, now: datetime) -> list[MaintRow]:
    """Windows from alerts.yaml (cron and fixed) plus chat-created ones from `alert_maintenance`."""
    cfg = deps.settings.section("alerts")
    tz = deps.settings.core.timezone
    rows: list[MaintRow] = []
    if cfg is not None:
        from xihe.agent.alerts.maintenance import MaintenanceBook

        cron_active = {s.name: s.active(now) for s in MaintenanceBook.from_config(cfg).schedules}
        for m in cfg.maintenance:
            scope = "all" if m.scope.kind == "all" else f"{m.scope.kind}:{m.scope.value}"
            if m.cron:
                when = f"cron '{m.cron}' for {m.duration_minutes} min ({cfg.timezone})"
                rows.append(MaintRow(m.name, when, scope, "alerts.yaml", cron_active.get(m.name, False)))
            elif m.start is not None and m.end is not None:
                when = f"{show(m.start, tz, seconds=False)} → {show(m.end, tz, seconds=False)}"
                rows.append(MaintRow(m.name, when, scope, "alerts.yaml", m.start <= now < m.end))
    stored = recent_rows(deps.engine, "alert_maintenance", limit=100)
    for r in stored[1] if stored is not None else []:
        start, end = r.get("start") or r.get("start_at"), r.get("end") or r.get("end_at")
        if isinstance(start, str):
            start = _iso(start)
        if isinstance(end, str):
            end = _iso(end)
        closed = r.get("closed_at")
        active = (
            isinstance(start, datetime) and isinstance(end, datetime) and start <= now < end and not closed
        )
        scope = f"{r.get('scope_kind') or 'all'}:{r.get('scope_value') or ''}".rstrip(":")
        name = str(r.get("note") or r.get("window_id") or r.get("id") or "")
        when = f"{_fmt(start, tz)} → {_fmt(end, tz)}"
        if closed:
            when += f" (closed {_fmt(closed, tz)} by {r.get('closed_by') or '-'})"
        by = f" by {r['created_by']}" if r.get("created_by") else ""
        rows.append(MaintRow(name, when, scope, f"{r.get('source') or 'chat'}{by}", active))
    return rows


def _fmt(value: Any, tz: str) -> str:
    return show(value, tz, seconds=False) if isinstance(value, datetime) else str(value)


def _iso(text: str) -> datetime | None:
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        return None
    return _aware(value)
