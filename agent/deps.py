"""Deps: everything a tool or command may use, passed explicitly (nothing global)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine

from xihe.agent.artifacts import ArtifactStore
from xihe.agent.audit import SqlAuditSink
from xihe.agent.clock import Clock
from xihe.agent.metrics import Metrics
from xihe.agent.pending import PendingStore
from xihe.agent.redact import Redactor
from xihe.agent.tasks import TaskStore
from xihe.config.load import Settings

Notify = Callable[[str, str], None]  # (conversation, markdown text): progress and late results


class Progress(str):
    """A progress note for `Deps.notify`: a channel may throttle these per task; other texts always go."""

    task_id: int | None = None

    def __new__(cls, text: str, task_id: int | None = None) -> Progress:
        note = super().__new__(cls, text)
        note.task_id = task_id
        return note


@dataclass
class Deps:
    """Stores, clock, config and outside-service clients for one process."""

    settings: Settings
    engine: Engine
    clock: Clock
    tasks: TaskStore
    audit: SqlAuditSink
    pending: PendingStore
    artifacts: ArtifactStore
    redactor: Redactor
    fallback_notify: Notify | None = None  # where messages for conversations no channel claims go
    holder: str = "xihe"  # lease holder name of this process/replica
    metrics: Metrics = field(default_factory=Metrics)
    services: dict[str, Any] = field(default_factory=dict)  # integration clients by name (dolphin, ...)
    senders: dict[str, Notify] = field(default_factory=dict)  # conversation-id prefix → channel sender

    def notify(self, conversation: str, text: str) -> None:
        """Post to a conversation through the channel that owns its id prefix (e.g. 'wecom:app:')."""
        for prefix in sorted(self.senders, key=len, reverse=True):
            if conversation.startswith(prefix):
                self.senders[prefix](conversation, text)
                return
        if self.fallback_notify is not None:
            self.fallback_notify(conversation, text)

    def service(self, name: str) -> Any:
        """An integration client, or a clear error when it is not configured."""
        from xihe.agent.errors import ToolFailed

        if name not in self.services:
            raise ToolFailed(f"{name} is not configured on this bot")
        return self.services[name]
