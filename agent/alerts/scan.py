"""Scan DolphinScheduler for failed runs the bot did not start, and hand them to the alert pipeline.

The watcher (`xihe.tools.dolphin.poll`) reports the runs the bot started; cron runs and runs started in the
DS UI are only seen by DolphinScheduler's own alert plugin (the webhook) or by this scan. One scan:

    for each configured project:
        list FAILURE instances that started since now - lookback - max_run (DS filters by start),
        keep those that ended within the look-back window,
        skip the bot's own runs (ids and markers of `ds_watch` rows; on 3.1, whose list rows carry
            no params, a run of a definition whose watch is still discovering waits for the poller),
        skip instances already handed over (a marker row), claim the rest one at a time,
        read the failed tasks (host, retries, error line, log tail: `ds_poll.failure_events`),
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
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from prometheus_client import Counter as PromCounter
from sqlalchemy import Engine, and_, delete, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite

from xihe.agent.alerts.state import NS_SEEN
from xihe.agent.errors import DolphinError
from xihe.agent.schema import alert_state, ds_watch
from xihe.config.alerts import Scan
from xihe.config.workflows import WorkflowsConfig
from xihe.integrations.dolphinscheduler.client import DolphinClient
from xihe.integrations.dolphinscheduler.factory import client_from_config
from xihe.integrations.dolphinscheduler.models import Instance
from xihe.integrations.dolphinscheduler.runs import DISCOVERY_SKEW
from xihe.tools.dolphin.events import FailureEvent
from xihe.tools.dolphin.poll import failure_events
from xihe.tools.dolphin.watch import PollPolicy, Watch

if TYPE_CHECKING:
    from xihe.agent.deps import Deps
    from xihe.tools.dolphin.service import DolphinService

log = logging.getLogger("xihe.alerts.scan")

KEY_PREFIX = "scan:"
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


@dataclass(frozen=True)
class Known:
    """What the bot's own watches cover: their instances are the poller's to report."""

    instance_ids: frozenset[int] = frozenset()
    markers: frozenset[str] = frozenset()
    discovering: tuple[tuple[int, datetime], ...] = ()  # (definition code, started_at) still looking

    def why_not_ours(self, inst: Instance) -> str:
        """ "" when the scan should report `inst`; else why it is skipped."""
        if inst.id in self.instance_ids or (inst.marker and inst.marker in self.markers):
            return "watched"
        if inst.marker is None:  # 3.1 list rows carry no params: a watch may be about to find it
            start = inst.start_time
            for code, started_at in self.discovering:
                if code == inst.definition_code and (start is None or start >= started_at - DISCOVERY_SKEW):
                    return "discovering"
        return ""


@dataclass
class ScanResult:
    """What one scan did: events handed over, instances skipped by reason, errors, requests sent."""

    events: list[FailureEvent] = field(default_factory=list)
    reported: list[int] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)


def known_from_watches(engine: Engine, since: datetime) -> Known:
    """Instance ids and markers of watches not done, or touched since `since` (one query)."""
    w = ds_watch.c
    query = select(w.key, w.definition_code, w.started_at, w.done, w.state).where(
        or_(w.done.is_(False), w.updated_at >= since, w.started_at >= since)
    )
    ids: set[int] = set()
    markers: set[str] = set()
    discovering: list[tuple[int, datetime]] = []
    with engine.connect() as conn:
        for key, definition_code, started_at, done, state in conn.execute(query):
            st = state if isinstance(state, dict) else json.loads(state or "{}")
            found = [int(i) for i in st.get("instance_ids", ())]
            ids.update(found)
            markers.add(str(key))
            if not done and len(found) < int(st.get("expected_runs", 1)):
                discovering.append((int(definition_code), started_at))
    return Known(frozenset(ids), frozenset(markers), tuple(discovering))


def mark_key(inst: Instance) -> str:
    """The marker row key of one run of an instance (a rerun is a new run)."""
    return f"{KEY_PREFIX}{inst.id}:{inst.run_times}"


# ---- marker rows -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Mark:
    """A marker row's payload: `claimed` (with a lease) or `done`."""

    status: str
    holder: str
    until: datetime  # claimed: lease end; done: when it was handed over

    def text(self) -> str:
        return json.dumps(f"{self.status}|{self.holder}|{self.until.isoformat()}")

    @classmethod
    def parse(cls, payload: str) -> Mark:
        status, holder, until = str(json.loads(payload)).split("|", 2)
        return cls(status, holder, datetime.fromisoformat(until))


class ScanMarks:
    """Marker rows in `alert_state` (namespace `seen`): one per scanned instance run."""

    def __init__(self, engine: Engine, holder: str) -> None:
        self.engine = engine
        self.holder = holder
        self._insert = (
            (postgresql.insert if engine.dialect.name == "postgresql" else sqlite.insert)(alert_state)
            .on_conflict_do_nothing(index_elements=["ns", "key"])
            .returning(alert_state.c.key)
        )

    def load(self, keys: Sequence[str]) -> dict[str, tuple[Mark, str]]:
        """The marks present among `keys`, with their row tokens."""
        if not keys:
            return {}
        t = alert_state.c
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(t.key, t.payload, t.token).where(and_(t.ns == NS_SEEN, t.key.in_(list(keys))))
            ).all()
        out = {}
        for key, payload, token in rows:
            try:
                out[key] = (Mark.parse(payload), token)
            except ValueError:
                log.warning("unreadable scan marker %s: %r", key, payload)
        return out

    def claim(
        self, key: str, now: datetime, lease: timedelta, expires: datetime, seen: tuple[Mark, str] | None
    ) -> str | None:
        """Claim `key` for this replica; the row token when we hold it, None when someone else does.

        New keys are inserted only if absent (two replicas: one wins). A claim whose lease lapsed
        (`seen`, read before) is taken over only if its token is still the one we read.
        """
        token = uuid.uuid4().hex
        values = {
            "payload": Mark("claimed", self.holder, now + lease).text(),
            "due_at": expires,
            "token": token,
            "updated_at": now,
        }
        t = alert_state.c
        with self.engine.begin() as conn:
            if seen is None:
                inserted = conn.execute(self._insert.values(ns=NS_SEEN, key=key, **values)).first()
                won = 1 if inserted is not None else 0  # rowcount is -1 here on psycopg
            else:
                mark, old = seen
                if mark.status != "claimed" or mark.until > now:
                    return None
                won = conn.execute(
                    update(alert_state)
                    .where(and_(t.ns == NS_SEEN, t.key == key, t.token == old))
                    .values(**values)
                ).rowcount
        return token if won == 1 else None

    def done(self, key: str, token: str, now: datetime, expires: datetime) -> None:
        """The instance was handed over: keep the marker until it leaves the look-back window."""
        t = alert_state.c
        with self.engine.begin() as conn:
            conn.execute(
                update(alert_state)
                .where(and_(t.ns == NS_SEEN, t.key == key, t.token == token))
                .values(
                    payload=Mark("done", self.holder, now).text(),
                    due_at=expires,
                    token=uuid.uuid4().hex,
                    updated_at=now,
                )
            )

    def release(self, key: str, token: str) -> None:
        """Give a claim back at once (the instance could not be read or fed): the next scan retries."""
        t = alert_state.c
        with self.engine.begin() as conn:
            conn.execute(delete(alert_state).where(and_(t.ns == NS_SEEN, t.key == key, t.token == token)))


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
    feed: Callable[[list[FailureEvent]], Any],
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
) -> list[FailureEvent] | None:
    """The failed tasks of `inst` as FailureEvents (source "scan"); None when /tasks could not be read."""
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
    if len(events) == 1 and not events[0].task and events[0].error.startswith(_UNREADABLE):
        return None
    return [replace(e, source="scan") for e in events]


# ---- the job's state in one process ------------------------------------------------------------
class Scanner:
    """The scan of one bot process: its own DS client (requests counted), project codes, counters.

    The alerts feature keeps one (its `Installed.state`) when `scan.enabled`; the `alerts_scan` job calls `run`.
    """

    def __init__(self, deps: Deps, cfg: Scan, workflows: WorkflowsConfig) -> None:
        self.deps = deps
        self.cfg = cfg
        self.workflows = workflows
        self.marks = ScanMarks(deps.engine, deps.holder)
        registry = deps.metrics.registry
        self.requests = PromCounter(
            "xihe_ds_scan_requests_total",
            "DolphinScheduler requests of the failed-run scan",
            registry=registry,
        )
        self.outcomes = PromCounter(
            "xihe_ds_scan_instances_total",
            "failed runs the scan looked at, by outcome",
            ["outcome"],
            registry=registry,
        )
        self._client: DolphinClient | None = None
        self._codes: dict[str, int] = {}  # project name → code (codes never change)

    def client(self, ds: DolphinService) -> DolphinClient:
        """A client of its own, so every request it sends is counted as a scan request."""
        if self._client is None:
            client = client_from_config(ds.config)
            client.http.hooks["response"].append(lambda response, *a, **kw: self.requests.inc())
            self._client = client
        return self._client

    def targets(self, ds: DolphinService, client: DolphinClient, result: ScanResult) -> list[Target]:
        """The configured projects with their codes (catalog, else asked once) and workflow names."""
        catalog = ds.catalog.entries()
        for e in catalog:
            self._codes.setdefault(e.project, e.project_code)
        out = []
        for name in self.cfg.projects:
            if name not in self._codes:
                try:
                    self._codes[name] = client.project_code(name)
                except DolphinError as exc:
                    result.errors.append(f"project {name}: {exc}")
                    continue
            code = self._codes[name]
            out.append(
                Target(
                    name,
                    code,
                    {e.code: e.name for e in catalog if e.project_code == code},
                    {w.name: w.environment for w in self.workflows.workflows if w.project == name},
                )
            )
        return out

    def run(self, ds: DolphinService, feed: Callable[[list[FailureEvent]], Any], now: datetime) -> ScanResult:
        """One scan at `now`; DolphinScheduler errors end up in `result.errors`, never raised."""
        policy = ScanPolicy.from_config(self.cfg, ds.policy.log_tail_lines)
        client = self.client(ds)
        result = ScanResult()
        targets = self.targets(ds, client, result)
        known = known_from_watches(self.deps.engine, now - policy.lookback - policy.max_run)
        scanned = scan_once(client, targets, known, self.marks, feed, now, policy)
        result.events, result.reported = scanned.events, scanned.reported
        result.skipped.update(scanned.skipped)
        result.errors.extend(scanned.errors)
        if result.reported:
            self.outcomes.labels("reported").inc(len(result.reported))
        for why, n in result.skipped.items():
            self.outcomes.labels(why).inc(n)
        if result.errors:
            self.outcomes.labels("error").inc(len(result.errors))
        for error in result.errors:
            log.warning("failed-run scan: %s", error)
        return result
