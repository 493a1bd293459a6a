"""What the bot follows in DolphinScheduler: `Watch` rows, their store, and what a poll reports.

A `Watch` is a durable row: one started run (or serial backfill) identified by its `xihe_run`
marker, with the instances found so far, their last states and what was already reported. A rerun
reopens the watch with a `PendingRerun` (what the instance looked like before it). The polling
itself is `xihe.tools.dolphin.poll`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Protocol

from xihe.agent.alert_event import AlertEvent
from xihe.config.dolphin import PollConfig
from xihe.integrations.dolphinscheduler.models import Instance
from xihe.integrations.dolphinscheduler.runs import StartOutcome

SCHEMA_VERSION = 1
RERUN_SENT = "RERUN_SENT"  # the state a watch keeps for an instance until DS picks its rerun up


@dataclass(frozen=True)
class PendingRerun:
    """A rerun sent for one instance and not yet seen picked up: what the instance looked like before."""

    instance_id: int
    run_times: int
    end_time: datetime | None
    sent_at: datetime
    by: str  # "<task>:<step>" of the rerun step (crash lookup)

    def picked_up(self, inst: Instance) -> bool:
        """Whether `inst` shows a newer attempt than the one the rerun was sent for."""
        return inst.run_times > self.run_times or inst.end_time != self.end_time


@dataclass(frozen=True)
class PollPolicy:
    """How often and how deep to poll."""

    interval: float = 15.0  # seconds between polls right after a change
    max_interval: float = 300.0  # back off up to this while nothing changes
    backoff: float = 2.0
    max_pages: int = 20  # list pages per project and cycle
    discovery_timeout: float = 3600.0  # give up looking for a run that never appeared
    log_tail_lines: int = 50


DEFAULT_POLICY = PollPolicy()


@dataclass(frozen=True)
class Watch:
    """One started run (or serial backfill) the bot follows until it ends; a durable row."""

    key: str  # the marker "<task>:<step>", unique
    task_id: str
    conversation: str
    project: str
    project_code: int
    workflow: str
    definition_code: int
    started_at: datetime  # when the start was sent: the lower bound for discovery
    next_poll_at: datetime
    expected_runs: int = 1  # dates of a serial backfill
    instance_ids: tuple[int, ...] = ()
    states: tuple[tuple[int, str], ...] = ()  # last seen state per instance
    reported: tuple[int, ...] = ()  # instances whose final state was already returned
    foreign_ids: tuple[int, ...] = ()  # same definition, read in detail, not ours (3.1)
    interval: float = 15.0
    last_change_at: datetime | None = None
    done: bool = False
    environment: str = ""
    progress_tasks: bool = False  # read /tasks of running instances for "2/3 tasks" progress
    dates: tuple[str, ...] = ()  # business dates of a backfill, ascending (ISO)
    reruns: tuple[PendingRerun, ...] = ()  # reruns sent, not yet picked up by the master
    auth_warned: bool = False  # the conversation was told DS rejects our credentials
    biz_date_offset: int = 0  # scheduleTime = business date + this; reports name the business date
    schema_version: int = SCHEMA_VERSION

    @property
    def marker(self) -> str:
        """The startParams marker (same as key)."""
        return self.key

    @property
    def last_state(self) -> str:
        """A compact summary of the states, e.g. "101:SUCCESS,102:RUNNING_EXECUTION"."""
        return ",".join(f"{i}:{s}" for i, s in self.states)

    def state_of(self, instance_id: int) -> str:
        """Last seen state of one instance ("" when unseen)."""
        return dict(self.states).get(instance_id, "")

    def pending_rerun(self, instance_id: int) -> PendingRerun | None:
        """The rerun of `instance_id` not yet picked up, if any."""
        return next((r for r in self.reruns if r.instance_id == instance_id), None)


def watch_from_start(
    outcome: StartOutcome,
    *,
    task_id: str,
    conversation: str,
    project: str,
    project_code: int,
    workflow: str,
    definition_code: int,
    now: datetime,
    environment: str = "",
    policy: PollPolicy = PollPolicy(),
    dates: tuple[str, ...] = (),
) -> Watch:
    """The watch row for a run just started (or found again) by `runs.start_workflow`."""
    return Watch(
        key=outcome.marker,
        task_id=task_id,
        conversation=conversation,
        project=project,
        project_code=project_code,
        workflow=workflow,
        definition_code=definition_code,
        started_at=outcome.started_at,
        next_poll_at=now + timedelta(seconds=policy.interval),
        expected_runs=outcome.expected_runs,
        instance_ids=outcome.instance_ids,
        interval=policy.interval,
        last_change_at=now,
        environment=environment,
        dates=dates,
    )


def reopen_for_rerun(
    w: Watch, inst: Instance, *, by: str, task_id: str, conversation: str, now: datetime, policy: PollPolicy
) -> Watch:
    """`w` following `inst` again after a rerun was sent for it (see PendingRerun)."""
    pending = PendingRerun(inst.id, inst.run_times, inst.end_time, now, by)
    ids = tuple(sorted({*w.instance_ids, inst.id}))
    return replace(
        w,
        task_id=task_id,
        conversation=conversation,
        instance_ids=ids,
        states=tuple(sorted({**dict(w.states), inst.id: RERUN_SENT}.items())),
        reported=tuple(i for i in w.reported if i != inst.id),
        reruns=(*(r for r in w.reruns if r.instance_id != inst.id), pending),
        done=False,
        interval=policy.interval,
        next_poll_at=now + timedelta(seconds=policy.interval),
        last_change_at=now,
    )


@dataclass(frozen=True)
class Progress:
    """A watched run changed state but has not ended (for progress messages)."""

    watch: Watch
    instance: Instance
    state: str
    summary: str  # in English, for logs
    tasks_done: int | None = None  # task progress, when the watch reads it (progress_tasks)
    tasks_total: int = 0
    running: tuple[str, ...] = ()  # tasks running now


@dataclass(frozen=True)
class Finished:
    """A watched instance reached a final state; `watch_done` when the whole watch is over."""

    watch: Watch
    instance: Instance
    state: str
    summary: str  # in English, for logs
    watch_done: bool
    not_run: tuple[str, ...] = ()  # backfill dates after this one that the stopped chain did not run


@dataclass(frozen=True)
class NotFound:
    """No instance with the watch's marker appeared (or a rerun was not taken) within the discovery timeout."""

    watch: Watch
    summary: str
    rerun_of: int = 0  # the instance whose rerun DS never picked up; 0 for a start


@dataclass(frozen=True)
class AuthFailed:
    """DS rejected the poller's credentials; told once per watch until a poll works again."""

    watch: Watch
    error: str


Outcome = Progress | Finished | NotFound | AuthFailed


@dataclass(frozen=True)
class PollResult:
    """What one poll cycle learned: updated watches, outcomes for the chat, events for alerts."""

    watches: list[Watch]
    outcomes: list[Outcome] = field(default_factory=list)
    events: list[AlertEvent] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class WatchStore(Protocol):
    """Durable watch rows (a `watch` table in production, claimed with a lease)."""

    def add(self, watch: Watch) -> None:
        """Insert a new watch; an existing key is left as it is (idempotent)."""

    def get(self, key: str) -> Watch | None:
        """One watch by key."""

    def due(self, now: datetime, limit: int = 1000) -> list[Watch]:
        """Watches not done whose next_poll_at <= now, soonest first."""

    def save(self, watch: Watch) -> None:
        """Replace the stored row of `watch.key`."""

    def active(self) -> list[Watch]:
        """All watches not done."""


class InMemoryWatchStore:
    """WatchStore in a dict; for tests and demos."""

    def __init__(self) -> None:
        self._rows: dict[str, Watch] = {}

    def add(self, watch: Watch) -> None:
        """Insert unless the key exists."""
        self._rows.setdefault(watch.key, watch)

    def get(self, key: str) -> Watch | None:
        """One watch by key."""
        return self._rows.get(key)

    def due(self, now: datetime, limit: int = 1000) -> list[Watch]:
        """Due, not-done watches, soonest first."""
        rows = [w for w in self._rows.values() if not w.done and w.next_poll_at <= now]
        return sorted(rows, key=lambda w: (w.next_poll_at, w.key))[:limit]

    def save(self, watch: Watch) -> None:
        """Replace the row."""
        self._rows[watch.key] = watch

    def active(self) -> list[Watch]:
        """All watches not done."""
        return [w for w in self._rows.values() if not w.done]


def policy_from_config(poll: PollConfig) -> PollPolicy:
    """PollPolicy from the `poll:` section of config/dolphin.yaml."""
    return PollPolicy(
        interval=poll.interval_seconds,
        max_interval=poll.max_interval_seconds,
        backoff=poll.backoff,
        max_pages=poll.max_pages,
        discovery_timeout=poll.discovery_timeout_seconds,
        log_tail_lines=poll.log_tail_lines,
    )
