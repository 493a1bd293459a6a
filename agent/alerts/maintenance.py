"""Maintenance windows from YAML schedules and from `/maint on 30m [scope]` / `/maint off [scope]`.

`MaintenanceBook` is immutable: `add`/`remove` return a new book, `active(now, event)` is pure. The
chat layer (which checks roles and audits) parses the command with `parse_maint_command`,
persists the window through a `MaintenanceStore`, and rebuilds the book from the store.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Literal, Protocol
from zoneinfo import ZoneInfo

from xihe.agent.alert_event import AlertEvent
from xihe.agent.cron import CronSpec

if TYPE_CHECKING:
    from xihe.agent.i18n import Text
    from xihe.config.alerts import AlertsConfig

ScopeKind = Literal["all", "project", "workflow", "host"]


@dataclass(frozen=True)
class MaintScope:
    """What a window covers: everything, a project, a workflow or a worker host."""

    kind: ScopeKind = "all"
    value: str = ""

    def covers(self, event: AlertEvent) -> bool:
        """True when `event` falls under this scope (a host matches with or without its port)."""
        if self.kind == "all":
            return True
        if self.kind == "project":
            return event.project == self.value
        if self.kind == "workflow":
            return event.workflow == self.value
        host = event.host
        return host == self.value or host.split(":")[0] == self.value

    def __str__(self) -> str:
        return "all" if self.kind == "all" else f"{self.kind}:{self.value}"


@dataclass(frozen=True)
class MaintenanceWindow:
    """A fixed window [start, end) over a scope."""

    id: str
    start: datetime
    end: datetime
    scope: MaintScope = MaintScope()
    source: str = "chat"  # chat | yaml
    created_by: str = ""
    note: str = ""

    def to_dict(self) -> dict[str, str]:
        """JSON-ready form for a store row."""
        return {
            "id": self.id,
            "start": self.start.isoformat(),
            "end": self.end.isoformat(),
            "scope_kind": self.scope.kind,
            "scope_value": self.scope.value,
            "source": self.source,
            "created_by": self.created_by,
            "note": self.note,
        }

    @classmethod
    def from_dict(cls, d: dict[str, str]) -> MaintenanceWindow:
        """Inverse of `to_dict`."""
        kind = d.get("scope_kind", "all")
        if kind not in ("all", "project", "workflow", "host"):
            raise ValueError(f"bad scope kind {kind!r}")
        return cls(
            d["id"],
            datetime.fromisoformat(d["start"]),
            datetime.fromisoformat(d["end"]),
            MaintScope(kind, d.get("scope_value", "")),  # type: ignore[arg-type]
            d.get("source", "chat"),
            d.get("created_by", ""),
            d.get("note", ""),
        )


@dataclass(frozen=True)
class CronWindow:
    """A recurring window: every cron firing opens `duration` of maintenance."""

    name: str
    spec: CronSpec
    duration: timedelta
    tz: ZoneInfo
    scope: MaintScope = MaintScope()
    _memo: dict[int, bool] = field(default_factory=dict, compare=False, repr=False)

    def ends_at(self, now: datetime) -> datetime | None:
        """End of the occurrence in force at `now` (the latest firing in (now - duration, now]), or None."""
        if not self.active(now):
            return None
        base = datetime.fromtimestamp(int(now.timestamp()) // 60 * 60, tz=self.tz)
        for m in range(max(1, int(self.duration.total_seconds() // 60))):
            start = base - timedelta(minutes=m)
            if self.spec.matches(start.astimezone(self.tz)):
                return start + self.duration
        return None

    def active(self, now: datetime) -> bool:
        """True when some firing in (now - duration, now] exists."""
        minute = int(now.timestamp()) // 60
        hit = self._memo.get(minute)
        if hit is None:
            # The memo caches a pure function of the minute; it changes no observable behaviour.
            base = datetime.fromtimestamp(minute * 60, tz=self.tz)
            steps = max(1, int(self.duration.total_seconds() // 60))
            hit = any(
                self.spec.matches((base - timedelta(minutes=m)).astimezone(self.tz)) for m in range(steps)
            )
            if len(self._memo) > 10_000:
                self._memo.clear()
            self._memo[minute] = hit
        return hit


@dataclass(frozen=True)
class MaintenanceBook:
    """All maintenance windows in force; pure queries, copy-on-write updates."""

    windows: tuple[MaintenanceWindow, ...] = ()
    schedules: tuple[CronWindow, ...] = ()

    @classmethod
    def from_config(cls, config: AlertsConfig, stored: Iterable[MaintenanceWindow] = ()) -> MaintenanceBook:
        """Build from alerts.yaml schedules plus windows loaded from a MaintenanceStore."""
        tz = ZoneInfo(config.timezone)
        windows: list[MaintenanceWindow] = []
        schedules: list[CronWindow] = []
        for s in config.maintenance:
            scope = MaintScope(s.scope.kind, s.scope.value)
            if s.cron:
                schedules.append(
                    CronWindow(
                        s.name, CronSpec.parse(s.cron), timedelta(minutes=s.duration_minutes), tz, scope
                    )
                )
            elif s.start is not None and s.end is not None:
                windows.append(
                    MaintenanceWindow(f"yaml:{s.name}", s.start, s.end, scope, "yaml", note=s.name)
                )
        return cls(tuple(windows) + tuple(stored), tuple(schedules))

    def add(self, window: MaintenanceWindow) -> MaintenanceBook:
        """A book with `window` added (replacing one with the same id)."""
        return replace(self, windows=(*(w for w in self.windows if w.id != window.id), window))

    def remove(self, window_id: str) -> MaintenanceBook:
        """A book without the window `window_id`."""
        return replace(self, windows=tuple(w for w in self.windows if w.id != window_id))

    def active(self, now: datetime, event: AlertEvent) -> str | None:
        """The name of a window covering `event` at `now`, or None."""
        found = self.covering(now, event)
        return found[0] if found else None

    def covering(self, now: datetime, event: AlertEvent) -> tuple[str, datetime] | None:
        """(name, end) of a window covering `event` at `now`, or None."""
        for w in self.windows:
            if w.start <= now < w.end and w.scope.covers(event):
                return w.note or w.id, w.end
        for s in self.schedules:
            if s.scope.covers(event):
                end = s.ends_at(now)
                if end is not None:
                    return s.name, end
        return None

    def config_windows(self, now: datetime) -> list[tuple[str, MaintScope, datetime]]:
        """(name, scope, end) of the alerts.yaml windows in force at `now` (fixed ones and the current
        occurrence of a cron schedule)."""
        out = [
            (w.note or w.id, w.scope, w.end)
            for w in self.windows
            if w.source == "yaml" and w.start <= now < w.end
        ]
        for s in self.schedules:
            end = s.ends_at(now)
            if end is not None:
                out.append((s.name, s.scope, end))
        return out

    def config_occurrences(self, now: datetime) -> list[MaintenanceWindow]:
        """The alerts.yaml windows in force at `now` as windows, one id per occurrence (a cron
        schedule's `yaml:NAME:<start epoch>`), for the notices the channels get."""
        out = [w for w in self.windows if w.source == "yaml" and w.start <= now < w.end]
        for s in self.schedules:
            end = s.ends_at(now)
            if end is not None:
                start = end - s.duration
                ident = f"yaml:{s.name}:{int(start.timestamp())}"
                out.append(MaintenanceWindow(ident, start, end, s.scope, "yaml", note=s.name))
        return out

    def chat_windows(self, now: datetime) -> tuple[MaintenanceWindow, ...]:
        """Chat-created windows still open at `now` (what `/maint off` would close)."""
        return tuple(w for w in self.windows if w.source == "chat" and w.end > now)


class MaintenanceStore(Protocol):
    """Persistence of chat-created windows (table `alert_maintenance`, see the report)."""

    def save(self, window: MaintenanceWindow) -> None:
        """Insert or replace the window with this id."""

    def delete(self, window_id: str) -> None:
        """Remove the window; a missing id is not an error."""

    def load(self) -> list[MaintenanceWindow]:
        """All stored windows."""


class InMemoryMaintenanceStore:
    """MaintenanceStore in a dict."""

    def __init__(self) -> None:
        self._rows: dict[str, dict[str, str]] = {}

    def save(self, window: MaintenanceWindow) -> None:
        """Insert or replace."""
        self._rows[window.id] = window.to_dict()

    def delete(self, window_id: str) -> None:
        """Remove if present."""
        self._rows.pop(window_id, None)

    def load(self) -> list[MaintenanceWindow]:
        """All windows."""
        return [MaintenanceWindow.from_dict(r) for r in self._rows.values()]


@dataclass(frozen=True)
class MaintOn:
    """`/maint on DURATION [scope]`."""

    window: MaintenanceWindow


@dataclass(frozen=True)
class MaintOff:
    """`/maint off [scope]`: close chat windows (of that scope, or all)."""

    scope: MaintScope | None


def _said(key: str, **values: object) -> Text:
    """A `/maint` message from its catalog (imported by the command that needs one, not by the
    alert pipeline, which only reads windows)."""
    from xihe.agent.alerts.messages import MAINT
    from xihe.agent.i18n import text

    return text(MAINT, key, **values)


class MaintError(ValueError):
    """A `/maint` argument that is wrong; `message` says so in any language (`str()` is English)."""

    def __init__(self, message: Text) -> None:
        super().__init__(str(message))
        self.message = message


_DURATION = re.compile(r"^(\d+)\s*(m|min|h|d)$", re.I)


def parse_scope(text: str) -> MaintScope:
    """`all`, `project:X`, `workflow:X`, `host:X`; a bare word means a workflow name."""
    text = text.strip()
    if not text or text == "all":
        return MaintScope()
    kind, sep, value = text.partition(":")
    if sep and kind in ("project", "workflow", "host") and value:
        return MaintScope(kind, value)  # type: ignore[arg-type]
    if sep and kind in ("project", "workflow", "host"):
        raise MaintError(_said("scope_value", scope=text))
    return MaintScope("workflow", text)


def parse_maint_command(text: str, now: datetime, user: str) -> MaintOn | MaintOff:
    """Parse `/maint on 30m [scope]` or `/maint off [scope]`; raise MaintError with a usage hint."""
    usage = _said("usage")
    parts = text.split()
    if parts and parts[0] in ("/maint", "maint"):
        parts = parts[1:]
    if not parts or parts[0] not in ("on", "off"):
        raise MaintError(usage)
    if parts[0] == "off":
        return MaintOff(parse_scope(" ".join(parts[1:])) if len(parts) > 1 else None)
    if len(parts) < 2:
        raise MaintError(usage)
    if not (m := _DURATION.match(parts[1])):
        raise MaintError(_said("bad_duration", duration=parts[1], usage=usage))
    amount, unit = int(m.group(1)), m.group(2).lower()
    minutes = amount * {"m": 1, "min": 1, "h": 60, "d": 1440}[unit]
    if not 1 <= minutes <= 7 * 1440:
        raise MaintError(_said("length", duration=parts[1]))
    scope = parse_scope(" ".join(parts[2:]))
    wid = f"chat:{user}:{int(now.timestamp())}:{scope}"
    return MaintOn(MaintenanceWindow(wid, now, now + timedelta(minutes=minutes), scope, "chat", user))


def apply_maint_command(
    book: MaintenanceBook,
    cmd: MaintOn | MaintOff,
    now: datetime,
) -> tuple[MaintenanceBook, list[str], list[str]]:
    """Apply a parsed command; returns (new book, ids added, ids removed) for the store and the audit."""
    if isinstance(cmd, MaintOn):
        return book.add(cmd.window), [cmd.window.id], []
    gone = [w.id for w in book.chat_windows(now) if cmd.scope is None or w.scope == cmd.scope]
    for wid in gone:
        book = book.remove(wid)
    return book, [], gone
