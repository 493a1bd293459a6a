"""Polling the DolphinScheduler runs the bot follows (`xihe.tools.dolphin.watch`), with as few requests as possible.

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
workflow RUNNING_EXECUTION and then SUCCESS, so it produces no event. For a FAILURE run the
poller reads the current task attempts, and for each failed one its host, retry counts and the tail
of its log, and returns one `AlertEvent` per failed task (the workflow's FAILURE naming that task)
for the alert pipeline.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from xihe.agent.alert_event import AlertEvent
from xihe.agent.errors import DolphinError
from xihe.integrations.dolphinscheduler.client import DolphinClient
from xihe.integrations.dolphinscheduler.dag import tasks_total
from xihe.integrations.dolphinscheduler.errors import DolphinAuthError
from xihe.integrations.dolphinscheduler.models import Instance, detail_marker
from xihe.integrations.dolphinscheduler.runs import DISCOVERY_SKEW
from xihe.integrations.dolphinscheduler.states import TASK_FAILED, TASK_SUCCEEDED, is_terminal
from xihe.tools.dolphin.dates import run_date_label
from xihe.tools.dolphin.error_line import error_line
from xihe.tools.dolphin.watch import (
    DEFAULT_POLICY,
    RERUN_SENT,
    AuthFailed,
    Finished,
    NotFound,
    PollPolicy,
    PollResult,
    Progress,
    Watch,
    WatchStore,
)


def _schedule_label(w: Watch, inst: Instance) -> str:
    return (
        f" for {run_date_label(inst.schedule_time.date(), w.biz_date_offset)}" if inst.schedule_time else ""
    )


def _finished_summary(w: Watch, inst: Instance) -> str:
    took = f" in {inst.duration}" if inst.duration else ""
    return f"{w.workflow} instance {inst.id}{_schedule_label(w, inst)} ended {inst.state}{took}"


def _progress(client: DolphinClient, w: Watch, inst: Instance) -> Progress:
    base = f"{w.workflow} instance {inst.id}{_schedule_label(w, inst)} {inst.state}"
    plain = Progress(w, inst, inst.state, base)
    if not w.progress_tasks:
        return plain
    try:
        _, tasks = client.current_tasks(w.project_code, inst.id)
    except DolphinError:
        return plain
    done = sum(1 for t in tasks if t.state in TASK_SUCCEEDED)
    running = [t.name for t in tasks if t.state not in TASK_SUCCEEDED and t.state not in TASK_FAILED]
    total = tasks_total(client, w.project_code, inst, tasks)
    summary = base + f", {done}/{total} tasks done" + (f", running {', '.join(running)}" if running else "")
    return Progress(w, inst, inst.state, summary, done, total, tuple(running))


def business_date(w: Watch, inst: Instance) -> str:
    """The business date a run is for (its scheduleTime less the workflow's offset), "" unknown."""
    if inst.schedule_time is None:
        return ""
    return (inst.schedule_time.date() - timedelta(days=w.biz_date_offset)).isoformat()


def success_event(w: Watch, inst: Instance, now: datetime) -> AlertEvent:
    """The workflow event of a run that ended SUCCESS (the alert pipeline resolves what it answers)."""
    return AlertEvent(
        at=now,
        workflow=w.workflow,
        instance_id=inst.id,
        state="SUCCESS",
        project=w.project,
        workflow_code=w.definition_code,
        environment=w.environment,
        start_time=inst.start_time,
        end_time=inst.end_time,
        source="poller",
        business_date=business_date(w, inst),
    )


def failure_events(
    client: DolphinClient,
    w: Watch,
    inst: Instance,
    now: datetime,
    policy: PollPolicy = DEFAULT_POLICY,
) -> list[AlertEvent]:
    """One event per failed task of a FAILURE instance, with host, retries and log tail."""

    def event(**task: Any) -> AlertEvent:
        return AlertEvent(
            at=now,
            workflow=w.workflow,
            instance_id=inst.id,
            state=inst.state,
            project=w.project,
            workflow_code=w.definition_code,
            environment=w.environment,
            start_time=inst.start_time,
            end_time=task.pop("end_time", inst.end_time),
            source="poller",
            business_date=business_date(w, inst),
            **task,
        )

    try:
        _, tasks = client.current_tasks(w.project_code, inst.id)
    except DolphinError as exc:
        return [event(error=f"could not read tasks: {exc}")]
    failed = [t for t in tasks if t.state in TASK_FAILED]
    if not failed:
        return [event(error=f"workflow ended {inst.state} with no failed task")]
    events = []
    for t in failed:
        lines: list[str] = []
        note = ""
        if t.host:
            try:
                lines = client.log_tail(t.id, lines=policy.log_tail_lines)
            except DolphinError as exc:
                note = f" (log unavailable: DS {exc.code})"
        summary = error_line(lines, t.name, t.state) + note
        events.append(
            event(
                failed_task=t.name,
                failed_task_state=t.state,
                host=t.host,
                error=summary,
                retry_times=t.retry_times,
                max_retry_times=t.max_retry_times,
                log_tail="\n".join(lines),
                # when it failed: DolphinScheduler's end time of the task (the instance's if unknown),
                # as the webhook's taskEndTime; never when xihe noticed
                end_time=t.end_time or inst.end_time,
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
            elif state == "SUCCESS":  # resolves this instance's alert (a rerun), or an earlier run's
                result.events.append(success_event(w, inst, now))
        elif not is_terminal(state) and (old.get(instance_id) != state or w.progress_tasks):
            result.outcomes.append(replace(_progress(client, w, inst), watch=w2, state=state))
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
    policy: PollPolicy = DEFAULT_POLICY,
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
    policy: PollPolicy = DEFAULT_POLICY,
) -> PollResult:
    """The scheduler job body: poll the store's due watches and save them back."""
    result = poll_once(store.due(now), client, now, policy)
    for w in result.watches:
        store.save(w)
    return result
