"""Pipeline state (held instance messages, open windows, host hit lists, dedupe keys) behind a Protocol.

Everything the pipeline remembers between events lives here as frozen, JSON-serialisable records,
so a new `Pipeline` over the same store continues exactly where a stopped one left off.
`sql.state.SqlAlertStateStore` backs `AlertStateStore` with table `alert_state(ns, key,
payload JSON, due_at, token, updated_at, PRIMARY KEY (ns, key))` plus an index on `(due_at)`.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Protocol

from xihe.agent.alert_event import AlertEvent
from xihe.agent.alerts.model import Tier

SCHEMA_VERSION = 2  # 2: events in the AlertEvent form; windows name every instance

# Namespaces of the store.
NS_SEEN = "seen"  # dedupe keys; value: first-seen time
NS_INSTANCE = "inst"  # InstanceState by instance id
NS_HOST = "host"  # HostHits by worker host
NS_NODE = "node"  # Window(kind=node) by host
NS_FP = "fp"  # Window(kind=fp) by fingerprint|channel
NS_P2 = "p2"  # Window(kind=p2) by channel
NS_MAINT = "maint"  # Window(kind=maint) by maintenance window name: what it suppressed
NS_REPEAT = "repeat"  # Repeat by workflow|fingerprint: how often the same problem came back


def _t(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _dt(value: Any) -> datetime:
    return datetime.fromisoformat(str(value))


@dataclass(frozen=True)
class InstanceState:
    """One workflow instance: its message is held (collecting tasks), sent, or folded elsewhere."""

    instance_id: int
    status: str  # held | sent | folded
    tier: Tier
    channel: str
    opened_at: datetime
    events: tuple[AlertEvent, ...]
    target: str = ""  # notification key it went (or will go) out under
    next_summary_at: datetime | None = None
    extra_tasks: int = 0  # tasks beyond the ones kept in `events`
    followups: int = 0  # follow-up messages queued after the first (a task that failed later)
    repeat: Repeat | None = None  # the same workflow and fingerprint failed before (count includes this)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "v": SCHEMA_VERSION,
            "instance_id": self.instance_id,
            "status": self.status,
            "tier": self.tier.value,
            "channel": self.channel,
            "opened_at": _t(self.opened_at),
            "events": [e.to_dict() for e in self.events],
            "target": self.target,
            "next_summary_at": _t(self.next_summary_at),
            "extra_tasks": self.extra_tasks,
            "followups": self.followups,
            "repeat": self.repeat.to_dict() if self.repeat else None,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> InstanceState:
        """Inverse of `to_dict`."""
        return cls(
            int(d["instance_id"]),
            d["status"],
            Tier(d["tier"]),
            d["channel"],
            _dt(d["opened_at"]),
            tuple(AlertEvent.from_dict(e) for e in d["events"]),
            d.get("target", ""),
            _dt(d["next_summary_at"]) if d.get("next_summary_at") else None,
            int(d.get("extra_tasks", 0)),
            int(d.get("followups", 0)),
            Repeat.from_dict(d["repeat"]) if d.get("repeat") else None,
        )


@dataclass(frozen=True)
class Repeat:
    """The same problem (workflow + fingerprint) again: the how-many-th time, since when, first instance."""

    count: int
    first_at: datetime
    first_instance: int
    last_at: datetime

    def again(self, at: datetime) -> Repeat:
        """One more occurrence at `at`."""
        return Repeat(self.count + 1, self.first_at, self.first_instance, at)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "v": SCHEMA_VERSION,
            "count": self.count,
            "first_at": _t(self.first_at),
            "first_instance": self.first_instance,
            "last_at": _t(self.last_at),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Repeat:
        """Inverse of `to_dict`."""
        return cls(int(d["count"]), _dt(d["first_at"]), int(d["first_instance"]), _dt(d["last_at"]))


@dataclass(frozen=True)
class HostHits:
    """Recent distinct failed instances on one worker host (for suspect-node detection)."""

    host: str
    hits: tuple[tuple[datetime, int], ...]  # (at, instance_id), oldest first

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"v": SCHEMA_VERSION, "host": self.host, "hits": [[_t(a), i] for a, i in self.hits]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HostHits:
        """Inverse of `to_dict`."""
        return cls(d["host"], tuple((_dt(a), int(i)) for a, i in d["hits"]))


MAX_LISTED = 30  # workflows and hosts kept by name in a window; the rest are counted (instances: all)


@dataclass(frozen=True)
class Window:
    """An aggregation window: same fingerprint (fp), P2 summary (p2), suspect node (node) or what a
    maintenance window suppressed (maint)."""

    kind: str  # fp | p2 | node | maint
    key: str
    channel: str
    opened_at: datetime
    ends_at: datetime
    sample: AlertEvent  # first event, shown as the example
    folded: int = 0  # events folded in after the window opened (what the end-of-window message reports)
    workflows: tuple[tuple[str, int], ...] = ()  # (workflow, failures), first MAX_LISTED
    instances: tuple[int, ...] = ()  # every instance counted, in order (each must be named somewhere)
    hosts: tuple[str, ...] = ()
    mentions: tuple[str, ...] = ()
    top_tier: Tier = Tier.P1
    total: int = 0  # every event counted in the window, opening ones included
    last_at: datetime | None = None
    announced: Tier | None = None  # node: the tier its alert went out with (a higher one escalates)
    escalations: int = 0
    named: int = 0  # node: instances (first of `instances`) its alerts named already
    last_error: str = ""  # the latest error counted (a follow-up's 最近错误)
    # node: instances counted here whose own message (or summary) went out before the window opened;
    # the node alert names them apart ("also counted here"), never in its list of instances
    alerted: tuple[int, ...] = ()

    def add(self, event: AlertEvent, tier: Tier, mentions: tuple[str, ...], folded: bool) -> Window:
        """A copy with `event` counted."""
        wfs = dict(self.workflows)
        if event.workflow in wfs or len(wfs) < MAX_LISTED:
            wfs[event.workflow] = wfs.get(event.workflow, 0) + 1
        inst = self.instances
        if event.instance_id not in inst:
            inst = (*inst, event.instance_id)
        hosts = self.hosts
        if event.host and event.host not in hosts and len(hosts) < MAX_LISTED:
            hosts = (*hosts, event.host)
        ments = self.mentions + tuple(m for m in mentions if m not in self.mentions)
        top = tier if _rank(tier) < _rank(self.top_tier) else self.top_tier
        return Window(
            self.kind,
            self.key,
            self.channel,
            self.opened_at,
            self.ends_at,
            self.sample,
            self.folded + (1 if folded else 0),
            tuple(wfs.items()),
            inst,
            hosts,
            ments,
            top,
            self.total + 1,
            event.at,
            self.announced,
            self.escalations,
            self.named,
            event.error or self.last_error,
            self.alerted,
        )

    def drop(self, instance_id: int, workflow: str, folded: bool) -> Window:
        """A copy without one instance's single failure (it was named in a node alert instead)."""
        if instance_id not in self.instances:
            return self
        wfs = tuple((w, n - (w == workflow)) for w, n in self.workflows if n - (w == workflow) > 0)
        return replace(
            self,
            instances=tuple(i for i in self.instances if i != instance_id),
            workflows=wfs,
            folded=max(0, self.folded - (1 if folded else 0)),
            total=max(0, self.total - 1),
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "v": SCHEMA_VERSION,
            "kind": self.kind,
            "key": self.key,
            "channel": self.channel,
            "opened_at": _t(self.opened_at),
            "ends_at": _t(self.ends_at),
            "sample": self.sample.to_dict(),
            "folded": self.folded,
            "workflows": [list(w) for w in self.workflows],
            "instances": list(self.instances),
            "hosts": list(self.hosts),
            "mentions": list(self.mentions),
            "top_tier": self.top_tier.value,
            "total": self.total,
            "last_at": _t(self.last_at),
            "announced": self.announced.value if self.announced else None,
            "escalations": self.escalations,
            "named": self.named,
            "last_error": self.last_error,
            "alerted": list(self.alerted),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Window:
        """Inverse of `to_dict`."""
        return cls(
            d["kind"],
            d["key"],
            d["channel"],
            _dt(d["opened_at"]),
            _dt(d["ends_at"]),
            AlertEvent.from_dict(d["sample"]),
            int(d["folded"]),
            tuple((str(w), int(n)) for w, n in d["workflows"]),
            tuple(int(i) for i in d["instances"]),
            tuple(d["hosts"]),
            tuple(d["mentions"]),
            Tier(d["top_tier"]),
            int(d["total"]),
            _dt(d["last_at"]) if d.get("last_at") else None,
            Tier(d["announced"]) if d.get("announced") else None,
            int(d.get("escalations", 0)),
            int(d.get("named", 0)),
            str(d.get("last_error", "")),
            tuple(int(i) for i in d.get("alerted", ())),
        )


def rank(tier: Tier) -> int:
    """0 for P0 (the highest), 2 for P2."""
    return _rank(tier)


def _rank(tier: Tier) -> int:
    return {Tier.P0: 0, Tier.P1: 1, Tier.P2: 2}[tier]


Value = InstanceState | HostHits | Window | Repeat | str
_DECODERS: dict[str, Any] = {
    NS_INSTANCE: InstanceState.from_dict,
    NS_HOST: HostHits.from_dict,
    NS_NODE: Window.from_dict,
    NS_FP: Window.from_dict,
    NS_P2: Window.from_dict,
    NS_MAINT: Window.from_dict,
    NS_REPEAT: Repeat.from_dict,
}


def encode(value: Value) -> str:
    """Serialise a state value to the JSON text a database row holds."""
    return json.dumps(
        value if isinstance(value, str) else value.to_dict(), ensure_ascii=False, sort_keys=True
    )


def decode(ns: str, text: str) -> Value:
    """Inverse of `encode` for namespace `ns`."""
    data = json.loads(text)
    if ns == NS_SEEN:
        return str(data)
    value: Value = _DECODERS[ns](data)
    return value


class AlertStateStore(Protocol):
    """Namespaced records with an optional due time; `pop_due` drives window ends and expiry."""

    def get(self, ns: str, key: str) -> Value | None:
        """The record, or None."""

    def put(self, ns: str, key: str, value: Value, due_at: datetime | None) -> None:
        """Insert or replace; `due_at` (None = never) is when `pop_due` hands it back."""

    def delete(self, ns: str, key: str) -> None:
        """Remove; missing is fine."""

    def next_due(self) -> datetime | None:
        """Earliest due time of any record, or None."""

    def pop_due(self, now: datetime) -> Iterator[tuple[str, str, Value]]:
        """Yield (ns, key, value) of records due at or before `now`, earliest first. The caller
        replaces or deletes each record; a record left untouched is dropped."""


@dataclass
class InMemoryAlertStateStore:
    """AlertStateStore in dicts and a heap. `serialize=True` stores JSON text, as a database would."""

    serialize: bool = False
    _rows: dict[tuple[str, str], tuple[Any, datetime | None, int]] = field(default_factory=dict)
    _heap: list[tuple[datetime, int, str, str]] = field(default_factory=list)
    _seq: int = 0

    def get(self, ns: str, key: str) -> Value | None:
        """The record, or None."""
        row = self._rows.get((ns, key))
        if row is None:
            return None
        return decode(ns, row[0]) if self.serialize else row[0]

    def put(self, ns: str, key: str, value: Value, due_at: datetime | None) -> None:
        """Insert or replace."""
        self._seq += 1
        self._rows[(ns, key)] = (encode(value) if self.serialize else value, due_at, self._seq)
        if due_at is not None:
            heapq.heappush(self._heap, (due_at, self._seq, ns, key))

    def delete(self, ns: str, key: str) -> None:
        """Remove; missing is fine."""
        self._rows.pop((ns, key), None)

    def next_due(self) -> datetime | None:
        """Earliest due time, or None (stale heap entries on top dropped on the way)."""
        heap, rows = self._heap, self._rows
        while heap:
            due, seq, ns, key = heap[0]
            row = rows.get((ns, key))
            if row is not None and row[2] == seq:
                return due
            heapq.heappop(heap)  # stale entry: replaced or deleted since
        return None

    def pop_due(self, now: datetime) -> Iterator[tuple[str, str, Value]]:
        """Yield due records, earliest first; the caller replaces or deletes each."""
        while True:
            due = self.next_due()  # drops stale entries on top
            if due is None or due > now:
                return
            _due, seq, ns, key = heapq.heappop(self._heap)
            value = self.get(ns, key)
            if value is None:
                continue
            yield ns, key, value
            row = self._rows.get((ns, key))
            if row is not None and row[2] == seq:  # untouched by the caller: drop it
                del self._rows[(ns, key)]

    def count(self, ns: str) -> int:
        """Records in a namespace (tests and metrics)."""
        return sum(1 for n, _k in self._rows if n == ns)
