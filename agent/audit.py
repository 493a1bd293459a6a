"""Audit trail: who did what, through which tool, with what result and why it was allowed."""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import Connection, Engine, Text, cast, func, insert, or_, select

from xihe.agent.core_tables import audit_event, task
from xihe.agent.prepared import Prepared

SCHEMA_VERSION = 1
_INSERT = Prepared(insert(audit_event))  # a tool step's hot path (agent/prepared.py)


@dataclass(frozen=True)
class AuditEvent:
    """One audited fact. `args_redacted` must already be redacted."""

    at: datetime
    kind: str
    actor: str
    outcome: str
    task_id: int | None = None
    step_key: str | None = None
    intent: str | None = None
    tool: str | None = None
    args_redacted: Any = None
    reason: str | None = None
    result_digest: str | None = None
    duration_ms: int | None = None
    state_before: str | None = None
    state_after: str | None = None
    external_ids: dict[str, Any] | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        """The columns of its `audit_event` row.

        A shallow copy (no `asdict`, which deep-copies every nested value): the row is serialized
        by the insert at once, and the event is frozen. `detail` is a new dict with the schema version.
        """
        data = {name: getattr(self, name) for name in _FIELDS}
        data["detail"] = {"schema_version": SCHEMA_VERSION, **self.detail}
        return data


_FIELDS = tuple(f.name for f in fields(AuditEvent))


class AuditSink(Protocol):
    """Where audit events go; `record` must not lose an event it returned from."""

    def record(self, event: AuditEvent) -> None: ...


def write(conn: Connection, event: AuditEvent) -> None:
    """Insert inside the caller's transaction (so a step outcome and its audit commit together)."""
    _INSERT.run(conn, event.row(), insert=True)


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _json_escaped(text: str) -> str:
    """How the JSON column stores `text` (non-ASCII as \\uXXXX escapes), without the quotes."""
    return json.dumps(text)[1:-1]


class SqlAuditSink:
    """The production sink: the audit_event table."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def record(self, event: AuditEvent) -> None:
        with self.engine.begin() as conn:
            write(conn, event)

    def search(
        self,
        *,
        actor: str | None = None,
        tool: str | None = None,
        outcome: str | None = None,
        kind: str | None = None,
        task_id: int | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        text: str | None = None,
        workflow: str | Collection[str] | None = None,
        visible_to: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[dict[str, Any]]:
        """Newest first, filtered by any of the given fields.

        `visible_to` keeps the events that user owns: theirs as actor, or of a task they own.

        `text` matches (case-insensitively) anywhere in the actor, tool, reason, intent or arguments;
        `workflow` matches a call whose arguments name the workflow (`"workflow": "order_sync"`) by
        this name, or by any of these names (a workflow's name, aliases and code: see
        `xihe.tools.dolphin.names.names_of`).
        """
        q = select(audit_event).order_by(audit_event.c.id.desc()).limit(limit).offset(offset)
        args_text = cast(audit_event.c.args_redacted, Text)
        if text:
            needle = f"%{_like_escape(text.lower())}%"
            q = q.where(
                or_(
                    *(
                        func.lower(col).like(needle, escape="\\")
                        for col in (
                            audit_event.c.actor,
                            audit_event.c.tool,
                            audit_event.c.reason,
                            audit_event.c.intent,
                        )
                    ),
                    func.lower(args_text).like(needle, escape="\\"),
                    args_text.like(f"%{_like_escape(_json_escaped(text))}%", escape="\\"),
                )
            )
        names = [n for n in ([workflow] if isinstance(workflow, str) else sorted(workflow or ())) if n]
        if names:
            patterns = {
                f'%"workflow":{gap}"{_like_escape(spelled)}"%'
                for name in names
                for spelled in (name, _json_escaped(name))
                for gap in ("", " ")
            }
            lowered = func.lower(args_text)  # Order_Sync is order_sync
            q = q.where(or_(*(lowered.like(p.lower(), escape="\\") for p in sorted(patterns))))
        for col, val in (
            (audit_event.c.actor, actor),
            (audit_event.c.tool, tool),
            (audit_event.c.outcome, outcome),
            (audit_event.c.kind, kind),
            (audit_event.c.task_id, task_id),
        ):
            if val is not None:
                q = q.where(col == val)
        if visible_to is not None:
            owned = select(task.c.id).where(task.c.owner == visible_to)
            q = q.where(or_(audit_event.c.actor == visible_to, audit_event.c.task_id.in_(owned)))
        if since is not None:
            q = q.where(audit_event.c.at >= since)
        if until is not None:
            q = q.where(audit_event.c.at <= until)
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(q)]


class MemoryAuditSink:
    """An in-memory sink for tests and replays."""

    def __init__(self) -> None:
        self.events: list[AuditEvent] = []

    def record(self, event: AuditEvent) -> None:
        self.events.append(event)
