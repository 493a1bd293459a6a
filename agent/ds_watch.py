"""Watching DolphinScheduler runs the bot started, with as few requests as possible.

A `Watch` is a durable row: one started run (or serial backfill) identified by its marker. The
scheduler job calls `run_poll_cycle(store, client, now)`; `poll_once` groups the due watches by
project and reads their states from the paged instance list (filtered by definition when they
share one, and by start time), instead of one GET per run. Instances not yet known (3.1 returns no
id, 3.2 a trigger code, serial backfills add one instance per date) are discovered in the same
pages by their `xihe_run` marker. Watches back off while nothing changes.

A rerun (`/rerun`) reopens the watch that followed the instance with a `PendingRerun`: DS keeps the
old FAILURE state, endTime and runTimes until the master takes the command, so the watch waits for
a newer attempt (more runTimes or another endTime) before it reads a state as final; a rerun of a
backfill date then goes on following the rest of the chain under the original marker.

Only the final workflow state counts: a task that failed and then succeeded on retry leaves the
workflow RUNNING_EXECUTION and then SUCCESS, so it produces no FailureEvent. For a FAILURE run the
poller reads the current task attempts, and for each failed one its host, retry counts and the tail
of its log, and returns one `FailureEvent` per failed task for the alert pipeline.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Protocol

from agent.dates import run_date_label
from agent.errors import DolphinError
from agent.events import FailureEvent
from config.dolphin import PollConfig
from integrations.dolphinscheduler.client import DolphinAuthError, DolphinClient
from integrations.dolphinscheduler.dag import tasks_total
from integrations.dolphinscheduler.models import Instance, detail_marker
from integrations.dolphinscheduler.runs import DISCOVERY_SKEW, StartOutcome
from integrations.dolphinscheduler.states import TASK_FAILED, TASK_SUCCEEDED, is_terminal

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
    summary: str


@dataclass(frozen=True)
class Finished:
    """A watched instance reached a final state; `watch_done` when the whole watch is over."""

    watch: Watch
    instance: Instance
    state: str
    summary: str
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
    events: list[FailureEvent] = field(default_factory=list)
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


# ---- polling ---------------------------------------------------------------------------------


def _schedule_label(w: Watch, inst: Instance) -> str:
    return (
        f" for {run_date_label(inst.schedule_time.date(), w.biz_date_offset)}" if inst.schedule_time else ""
    )


def _finished_summary(w: Watch, inst: Instance) -> str:
    took = f" in {inst.duration}" if inst.duration else ""
    return f"{w.workflow} instance {inst.id}{_schedule_label(w, inst)} ended {inst.state}{took}"


def _progress_summary(client: DolphinClient, w: Watch, inst: Instance) -> str:
    base = f"{w.workflow} instance {inst.id}{_schedule_label(w, inst)} {inst.state}"
    if not w.progress_tasks:
        return base
    try:
        _, tasks = client.current_tasks(w.project_code, inst.id)
    except DolphinError:
        return base
    done = sum(1 for t in tasks if t.state in TASK_SUCCEEDED)
    running = [t.name for t in tasks if t.state not in TASK_SUCCEEDED and t.state not in TASK_FAILED]
    total = tasks_total(client, w.project_code, inst, tasks)
    return base + f", {done}/{total} tasks done" + (f", running {', '.join(running)}" if running else "")


_ERROR_LINE = re.compile(r"error|exception|failed|traceback", re.IGNORECASE)


def failure_events(
    client: DolphinClient,
    w: Watch,
    inst: Instance,
    now: datetime,
    policy: PollPolicy = PollPolicy(),
) -> list[FailureEvent]:
    """One FailureEvent per failed task of a FAILURE instance, with host, retries and log tail."""
    base = dict(
        at=now,
        project=w.project,
        workflow=w.workflow,
        workflow_code=w.definition_code,
        instance_id=inst.id,
        state=inst.state,
        environment=w.environment,
        start_time=inst.start_time,
        end_time=inst.end_time,
        source="poller",
    )
    try:
        _, tasks = client.current_tasks(w.project_code, inst.id)
    except DolphinError as exc:
        return [FailureEvent(**base, error=f"could not read tasks: {exc}")]  # type: ignore[arg-type]
    failed = [t for t in tasks if t.state in TASK_FAILED]
    if not failed:
        return [FailureEvent(**base, error=f"workflow ended {inst.state} with no failed task")]  # type: ignore[arg-type]
    events = []
    for t in failed:
        lines: list[str] = []
        note = ""
        if t.host:
            try:
                lines = client.log_tail(t.id, lines=policy.log_tail_lines)
            except DolphinError as exc:
                note = f" (log unavailable: DS {exc.code})"
        errors = [ln for ln in lines if _ERROR_LINE.search(ln)]
        summary = (errors[-1].strip()[:500] if errors else f"task {t.name} ended {t.state}") + note
        events.append(
            FailureEvent(
                **base,  # type: ignore[arg-type]
                task=t.name,
                host=t.host,
                error=summary,
                retry_times=t.retry_times,
                max_retry_times=t.max_retry_times,
                task_state=t.state,
                log_tail="\n".join(lines),
            )
        )
    return events


def _fetch_project(
    client: DolphinClient,
    project_code: int,
    watches: Sequence[Watch],
    policy: PollPolicy,
) -> tuple[dict[int, Instance], dict[str, list[Instance]]]:
    """Read the states of the watched instances and discover new ones; returns (by id, found by key)."""
    wanted = {i for w in watches for i in w.instance_ids if not is_terminal(w.state_of(i))}
    discovering = [w for w in watches if _discovering(w)]
    since = min(w.started_at for w in watches) - DISCOVERY_SKEW
    codes = {w.definition_code for w in watches}
    definition = next(iter(codes)) if len(codes) == 1 else None
    seen: dict[int, Instance] = {}
    found: dict[str, list[Instance]] = {}
    for page_no in range(1, policy.max_pages + 1):
        page = client.list_instances(
            project_code, definition_code=definition, start_from=since, page_no=page_no
        )
        for row in page.items:
            seen[row.id] = row
            if row.id in wanted:
                continue
            for w in discovering:
                if (
                    row.definition_code != w.definition_code
                    or row.id in w.instance_ids
                    or row.id in w.foreign_ids
                    or (row.start_time and row.start_time < w.started_at - DISCOVERY_SKEW)
                ):
                    continue
                if row.marker is None:  # 3.1 list rows carry no params: read this one in detail once
                    detail = client.get_instance(project_code, row.id)
                    seen[row.id] = row = replace(row, marker=detail_marker(detail))
                    if row.marker != w.key:
                        found.setdefault("", []).append(row)  # remember, so it is not read again
                if row.marker == w.key:
                    found.setdefault(w.key, []).append(row)
        missing = wanted - set(seen)
        if page_no >= page.total_page or (not missing and not discovering):
            break
        if not discovering and page.total_page - page_no > len(missing):
            break  # deep paging would cost more than reading the few missing runs one by one
    for instance_id in sorted(wanted - set(seen)):
        seen[instance_id] = client.get_instance(project_code, instance_id)
    return seen, found


def _discovering(w: Watch) -> bool:
    if len(w.instance_ids) >= w.expected_runs:
        return False
    # a serial backfill stops at the first non-SUCCESS end: no more instances will come
    return not any(is_terminal(s) and s != "SUCCESS" for _, s in w.states)


def _advance(
    client: DolphinClient,
    w: Watch,
    seen: dict[int, Instance],
    found: dict[str, list[Instance]],
    now: datetime,
    policy: PollPolicy,
    result: PollResult,
) -> Watch:
    ids = list(w.instance_ids)
    ours = [i for i in found.get(w.key, []) if i.id not in ids]
    ids.extend(i.id for i in ours)
    foreign = tuple(
        sorted(
            set(w.foreign_ids)
            | {
                i.id
                for i in found.get("", [])
                if i.marker is not None and i.definition_code == w.definition_code and i.id not in ids
            }
        )
    )
    old = dict(w.states)
    states = dict(old)
    reported = list(w.reported)
    pending = {r.instance_id: r for r in w.reruns}
    for instance_id in sorted(ids):
        inst = seen.get(instance_id)
        if inst is None:
            continue
        rerun = pending.get(instance_id)
        if rerun is not None:
            if not rerun.picked_up(inst):
                continue  # DS still shows the attempt the rerun was sent for
            del pending[instance_id]
        states[instance_id] = inst.state
    changed = states != old or len(ids) != len(w.instance_ids)
    w2 = replace(
        w,
        instance_ids=tuple(sorted(ids)),
        states=tuple(sorted(states.items())),
        foreign_ids=foreign,
        reruns=tuple(pending.values()),
        auth_warned=False,
    )
    chain_over = not _discovering(w2)
    all_final = all(is_terminal(s) for s in states.values()) and len(states) == len(ids)
    done = chain_over and all_final and bool(ids)
    chain = sorted(ids)
    for instance_id in chain:
        inst = seen.get(instance_id)
        state = states.get(instance_id, "")
        if inst is None or state == RERUN_SENT:
            continue
        if is_terminal(state) and instance_id not in reported:
            reported.append(instance_id)
            last = done and all(i in reported for i in ids)
            # a serial chain runs its dates in order, one instance each: the rest were not run
            not_run = w.dates[chain.index(instance_id) + 1 :] if state != "SUCCESS" and last else ()
            result.outcomes.append(Finished(w2, inst, state, _finished_summary(w, inst), last, not_run))
            if state == "FAILURE":
                result.events.extend(failure_events(client, w, inst, now, policy))
        elif not is_terminal(state) and (old.get(instance_id) != state or w.progress_tasks):
            result.outcomes.append(Progress(w2, inst, state, _progress_summary(client, w, inst)))
    if not ids and (now - w.started_at).total_seconds() > policy.discovery_timeout:
        result.outcomes.append(NotFound(w2, f"no {w.workflow} instance with marker {w.key} appeared"))
        done = True
    for rerun in list(pending.values()):
        if (now - rerun.sent_at).total_seconds() > policy.discovery_timeout:
            inst = seen.get(rerun.instance_id)
            if inst is not None:
                states[rerun.instance_id] = inst.state
            del pending[rerun.instance_id]
            w2 = replace(w2, states=tuple(sorted(states.items())), reruns=tuple(pending.values()))
            summary = (
                f"DolphinScheduler did not pick up the rerun of {w.workflow} instance {rerun.instance_id}"
            )
            result.outcomes.append(NotFound(w2, summary, rerun_of=rerun.instance_id))
            done = not pending and all(is_terminal(s) for s in states.values())
    interval = policy.interval if changed else min(w.interval * policy.backoff, policy.max_interval)
    return replace(
        w2,
        reported=tuple(reported),
        done=done,
        interval=interval,
        next_poll_at=now + timedelta(seconds=interval),
        last_change_at=now if changed else w.last_change_at,
    )


def poll_once(
    watches: Iterable[Watch],
    client: DolphinClient,
    now: datetime,
    policy: PollPolicy = PollPolicy(),
) -> PollResult:
    """Poll the due, unfinished watches (grouped by project); return updated watches and outcomes."""
    due = [w for w in watches if not w.done and w.next_poll_at <= now]
    result = PollResult(watches=[])
    by_project: dict[int, list[Watch]] = {}
    for w in due:
        by_project.setdefault(w.project_code, []).append(w)
    for project_code, group in sorted(by_project.items()):
        try:
            seen, found = _fetch_project(client, project_code, group, policy)
            updated = [_advance(client, w, seen, found, now, policy, result) for w in group]
        except DolphinError as exc:
            result.errors.append(f"project {project_code}: {exc}")
            auth = isinstance(exc, DolphinAuthError)
            for w in group:
                if auth and not w.auth_warned:
                    result.outcomes.append(AuthFailed(w, str(exc)))
            interval = {w.key: min(w.interval * policy.backoff, policy.max_interval) for w in group}
            updated = [
                replace(
                    w,
                    interval=interval[w.key],
                    next_poll_at=now + timedelta(seconds=interval[w.key]),
                    auth_warned=w.auth_warned or auth,
                )
                for w in group
            ]
        result.watches.extend(updated)
    return result


def run_poll_cycle(
    store: WatchStore,
    client: DolphinClient,
    now: datetime,
    policy: PollPolicy = PollPolicy(),
) -> PollResult:
    """The scheduler job body: poll the store's due watches and save them back."""
    result = poll_once(store.due(now), client, now, policy)
    for w in result.watches:
        store.save(w)
    return result


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
