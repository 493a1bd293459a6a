"""Scan DolphinScheduler for failed runs the bot did not start, and hand them to the alert pipeline.

The watcher (`xihe.tools.dolphin.poll`) reports the runs the bot started; cron runs and runs started in the
DS UI are only seen by DolphinScheduler's own alert plugin (the webhook) or by this scan. One scan:

    for each configured project:
        list FAILURE instances that started since now - lookback - max_run (DS filters by start),
        keep those that ended within the look-back window,
        skip the bot's own runs (ids and markers of `ds_watch` rows; on 3.1, whose list rows carry
            no params, a run of a definition whose watch is still discovering waits for the poller),
        skip instances already handed over (a marker row), claim the rest one at a time,
        read the failed tasks (host, retries, error line, log tail: `poll.failure_events`),
        feed them to the pipeline (`source="scan"`), mark the instance done.

Idempotent across runs and replicas: the marker is a row in `alert_state` (namespace `seen`, key
`scan:<instance>:<run>`), inserted only if absent, so of two replicas scanning at once exactly one
claims an instance and reads its logs; rescanning the same window finds the marker and sends
nothing. A claim is a lease: a replica that died between claim and feed leaves a claim that lapses
after `lease_seconds`, and the next scan takes it over with a conditional UPDATE on the row token.
The marker lives until the instance has left the look-back window; the pipeline's expiry then
drops it like any other `seen` key. Behind the markers the pipeline's own dedupe (one key per
instance, task, state and retry) still holds, so even a lost marker cannot send a second alert
for an event it remembers.

DolphinScheduler errors never escape: a project whose list fails is skipped this round, an
instance whose tasks cannot be read is released and retried on the next scan.

Here: one scan (`scan_once`). Which runs are the bot's own: scan_known.py; the marker rows:
scan_marks.py; the `alerts_scan` job's state in one process (client, counters): scanner.py.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from xihe.agent.alert_event import AlertEvent
from xihe.agent.dolphin.scan_known import Known
from xihe.agent.dolphin.scan_marks import ScanMarks, mark_key
from xihe.agent.errors import DolphinError
from xihe.config.alerts import Scan
from xihe.integrations.dolphinscheduler.client import DolphinClient
from xihe.integrations.dolphinscheduler.models import Instance
from xihe.integrations.dolphinscheduler.runs import DISCOVERY_SKEW
from xihe.tools.dolphin.poll import failure_events
from xihe.tools.dolphin.watch import PollPolicy, Watch

log = logging.getLogger("xihe.alerts.scan")

_UNREADABLE = "could not read tasks:"  # failure_events' event when /tasks failed: retry, do not report
_INSTANCE_SUFFIX = re.compile(r"-\d+-\d{14,17}$")  # "<definition>-<version>-<yyyyMMddHHmmss[SSS]>"


@dataclass(frozen=True)
class ScanPolicy:
    """How far back and how deep one scan looks."""

    lookback: timedelta = timedelta(minutes=30)
    max_run: timedelta = timedelta(hours=24)
    max_pages: int = 5
    lease: timedelta = timedelta(minutes=5)
    log_tail_lines: int = 50

    @classmethod
    def from_config(cls, cfg: Scan, log_tail_lines: int = 50) -> ScanPolicy:
        """From the `scan:` section of alerts.yaml (and dolphin.yaml's log tail length)."""
        return cls(
            lookback=timedelta(minutes=cfg.lookback_minutes),
            max_run=timedelta(hours=cfg.max_run_hours),
            max_pages=cfg.max_pages,
            lease=timedelta(seconds=cfg.lease_seconds),
            log_tail_lines=log_tail_lines,
        )


@dataclass(frozen=True)
class Target:
    """One project to scan, with what is needed to name its workflows."""

    project: str
    code: int
    workflow_names: dict[int, str] = field(default_factory=dict)  # definition code → name
    environments: dict[str, str] = field(default_factory=dict)  # workflow name → environment


@dataclass
class ScanResult:
    """What one scan did: events handed over, instances skipped by reason, errors, requests sent."""

    events: list[AlertEvent] = field(default_factory=list)
    reported: list[int] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)


# ---- one scan ----------------------------------------------------------------------------------
def _workflow_name(target: Target, inst: Instance) -> str:
    return target.workflow_names.get(inst.definition_code) or _INSTANCE_SUFFIX.sub("", inst.name) or inst.name


def _list_failed(
    client: DolphinClient, target: Target, now: datetime, policy: ScanPolicy, result: ScanResult
) -> list[Instance]:
    """FAILURE instances of a project that ended within the look-back window, newest start first."""
    ended_after = now - policy.lookback
    started_after = ended_after - policy.max_run - DISCOVERY_SKEW
    found: list[Instance] = []
    for page_no in range(1, policy.max_pages + 1):
        page = client.list_instances(target.code, state="FAILURE", start_from=started_after, page_no=page_no)
        for inst in page.items:
            if inst.state != "FAILURE":
                continue
            if inst.end_time is not None and inst.end_time < ended_after:
                result.skipped["ended_before_window"] += 1
                continue
            found.append(inst)
        if page_no >= page.total_page:
            break
    else:
        result.errors.append(
            f"project {target.project}: more than {policy.max_pages} pages of failed runs; the oldest were not read"
        )
    return found


def scan_once(
    client: DolphinClient,
    targets: Iterable[Target],
    known: Known,
    marks: ScanMarks,
    feed: Callable[[list[AlertEvent]], Any],
    now: datetime,
    policy: ScanPolicy = ScanPolicy(),
) -> ScanResult:
    """Report each failed run of `targets` the bot did not start, once; see the module docstring."""
    result = ScanResult()
    for target in targets:
        try:
            failed = _list_failed(client, target, now, policy, result)
        except DolphinError as exc:
            result.errors.append(f"project {target.project}: {exc}")
            continue
        mine = []
        for inst in failed:
            why = known.why_not_ours(inst)
            if why:
                result.skipped[why] += 1
            else:
                mine.append(inst)
        seen = marks.load([mark_key(i) for i in mine])
        for inst in mine:
            key = mark_key(inst)
            prior = seen.get(key)
            if prior is not None and prior[0].status == "done":
                result.skipped["already_reported"] += 1
                continue
            expires = max(inst.end_time or now, now) + 2 * policy.lookback + timedelta(minutes=10)
            token = marks.claim(key, now, policy.lease, expires, prior)
            if token is None:
                result.skipped["claimed_elsewhere"] += 1
                continue
            try:
                events = _events(client, target, inst, now, policy)
                if events is None:
                    result.errors.append(
                        f"instance {inst.id}: its tasks could not be read; retried next scan"
                    )
                    marks.release(key, token)
                    continue
                feed(events)
            except Exception as exc:  # a DS or pipeline error for one instance never stops the scan
                log.exception("scan could not report instance %s", inst.id)
                result.errors.append(f"instance {inst.id}: {exc}")
                marks.release(key, token)
                continue
            marks.done(key, token, now, expires)
            result.events.extend(events)
            result.reported.append(inst.id)
    return result


def _events(
    client: DolphinClient, target: Target, inst: Instance, now: datetime, policy: ScanPolicy
) -> list[AlertEvent] | None:
    """The failed tasks of `inst` as AlertEvents (source "scan"); None when /tasks could not be read."""
    name = _workflow_name(target, inst)
    pseudo = Watch(
        key=mark_key(inst),
        task_id="",
        conversation="",
        project=target.project,
        project_code=target.code,
        workflow=name,
        definition_code=inst.definition_code,
        started_at=inst.start_time or now,
        next_poll_at=now,
        environment=target.environments.get(name, ""),
    )
    events = failure_events(client, pseudo, inst, now, PollPolicy(log_tail_lines=policy.log_tail_lines))
    if len(events) == 1 and not events[0].failed_task and events[0].error.startswith(_UNREADABLE):
        return None
    return [replace(e, source="scan") for e in events]
