"""Deps: everything a tool or command may use, passed explicitly (nothing global)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy import Engine

from xihe.agent.alert_event import AlertEvent
from xihe.agent.artifacts import ArtifactStore
from xihe.agent.audit import SqlAuditSink
from xihe.agent.clock import Clock
from xihe.agent.i18n import Lang, lang_for
from xihe.agent.metrics import Metrics
from xihe.agent.pending import PendingStore
from xihe.agent.redact import Redactor
from xihe.agent.task_store import TaskStore
from xihe.config.access import AccessConfig
from xihe.config.load import Settings
from xihe.config.workflows import Workflow

if TYPE_CHECKING:
    from xihe.agent.subject import Subject

Notify = Callable[[str, str], None]  # (conversation, markdown text): progress and late results


class Progress(str):
    """A progress note for `Deps.notify`: a channel may throttle these per task; other texts always go."""

    task_id: int | None = None

    def __new__(cls, text: str, task_id: int | None = None) -> Progress:
        note = super().__new__(cls, text)
        note.task_id = task_id
        return note


class OutboxEntry(Protocol):
    """An alert outbox row, as a tool reports it."""

    @property
    def status(self) -> str: ...
    @property
    def sent_via(self) -> str: ...
    @property
    def channel(self) -> str: ...


class OutboxReader(Protocol):
    def get(self, key: str) -> OutboxEntry | None: ...


class AlertSink(Protocol):
    """The alert pipeline as other features and tools use it (`xihe.agent.alerts.service.AlertService`)."""

    @property
    def outbox(self) -> OutboxReader: ...

    def feed(self, events: Iterable[AlertEvent], bad: Iterable[tuple[str, str]] = ()) -> list[Any]:
        """Decide a batch of events (one poll, scan or webhook post); a record per event and bad item."""
        ...

    def raise_alert(
        self, key: str, channel: str, title: str, body: str, mentions: Iterable[str], actor: str
    ) -> tuple[str, bool]:
        """Queue a model-written message under outbox key `key`; (key, True if new)."""
        ...


class DolphinReader(Protocol):
    def get_instance(self, project_code: int, instance_id: int, /) -> Any: ...


class DolphinAccess(Protocol):
    """DolphinScheduler as other features use it (`xihe.tools.dolphin.service.DolphinService`)."""

    @property
    def client(self) -> DolphinReader: ...


class RunOrigins(Protocol):
    """Who started a run, when the bot did (`xihe.agent.dolphin.origin.SqlRunOrigins`): what an
    instance alert says about its run. `find` gives None for a run the bot did not start."""

    def find(self, instance_id: int, /) -> Any: ...


class ShellAccess(Protocol):
    """The whitelisted shell (`xihe.agent.shell.feature.ShellService`)."""

    def status_line(self, lang: Lang = ...) -> str: ...

    def subjects(self, access: AccessConfig) -> list[Subject]:
        """Each whitelisted entry as the gate sees it (its roles, environments and risk there)."""
        ...


class OnCallAccess(Protocol):
    """Who is on call for a workflow at a time (`xihe.agent.oncall.lookup.RotationOnCall`): the
    `OnCallLookup` of the alert pipeline's escalation chain and P0 mentions."""

    def __call__(self, wf: Workflow, at: datetime, /) -> tuple[str | None, str | None]:
        """(primary, secondary) userids; either may be None."""
        ...


class CodeSearch(Protocol):
    """The code indexes (`xihe.tools.codeindex.live.LiveIndexes`)."""

    def open(self) -> None: ...


@dataclass(kw_only=True)
class Services:
    """The services features provide to tools and to each other; None when the feature is off."""

    dolphin: DolphinAccess | None = None
    alerts: AlertSink | None = None
    origins: RunOrigins | None = None
    shell: ShellAccess | None = None
    code: CodeSearch | None = None
    oncall: OnCallAccess | None = None

    def merge(self, other: Services) -> Services:
        """Both sets in one; a service provided twice is an error."""
        out = {}
        for f in fields(Services):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            if mine is not None and theirs is not None:
                raise ValueError(f"two features provide the {f.name} service")
            out[f.name] = mine if mine is not None else theirs
        return Services(**out)


@dataclass(kw_only=True)
class Deps(Services):
    """Stores, clock, config and the features' services for one process."""

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
    senders: Mapping[str, Notify] = field(default_factory=dict)  # conversation-id prefix → channel sender
    reload_error: str | None = None  # why the latest config reload was refused (read by /readyz)
    listen: str = "127.0.0.1"  # the address `xihe serve` listens on (ui.yaml's cookie_secure: auto)

    def provide(self, services: Services, senders: Mapping[str, Notify]) -> None:
        """The composition root hands over what the features installed, once, before anything runs."""
        for f in fields(Services):
            setattr(self, f.name, getattr(services, f.name))
        self.senders = dict(senders)

    def lang(self, text: str, conversation: str) -> Lang:
        """The language to answer `text` in: its own, else that of the user's last free-text message
        in `conversation`, else the configured `language`."""
        return lang_for(
            text,
            lambda: [t.goal for t in self.tasks.recent(conversation=conversation, kind="chat", limit=5)],
            self.settings.core.language,
        )

    def notify(self, conversation: str, text: str) -> None:
        """Post to a conversation through the channel that owns its id prefix (e.g. 'wecom:app:')."""
        for prefix in sorted(self.senders, key=len, reverse=True):
            if conversation.startswith(prefix):
                self.senders[prefix](conversation, text)
                return
        if self.fallback_notify is not None:
            self.fallback_notify(conversation, text)
