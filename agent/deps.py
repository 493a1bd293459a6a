"""Deps: everything a tool or command may use, passed explicitly (nothing global)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine

from agent.artifacts import ArtifactStore
from agent.audit import SqlAuditSink
from agent.clock import Clock
from agent.pending import PendingStore
from agent.redact import Redactor
from agent.tasks import TaskStore
from config.load import Settings

Notify = Callable[[str, str], None]  # (conversation, markdown text): progress and late results


def _ignore(conversation: str, text: str) -> None:
    return None


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
    notify: Notify = _ignore
    holder: str = "xihe"  # lease holder name of this process/replica
    services: dict[str, Any] = field(
        default_factory=dict
    )  # integration clients by name (dolphin, robot, ...)

    def service(self, name: str) -> Any:
        """An integration client, or a clear error when it is not configured."""
        from agent.errors import ToolFailed

        if name not in self.services:
            raise ToolFailed(f"{name} is not configured on this bot")
        return self.services[name]
