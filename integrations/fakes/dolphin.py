"""DolphinSimulator: a loopback DolphinScheduler API (3.1, 3.2 or 3.3 profile) with a hand-moved clock.

Follows /work/shared/reference/dolphinscheduler-api.md §14 (and the §15 corrections): form
parameters, the `{code,msg,data}` envelope with business errors under HTTP 200, 401 with an empty
body, delayed instance creation for 3.1/3.2, serial backfills that stop at the first non-SUCCESS
date, task retries (new row, old row flag=NO, workflow stays RUNNING_EXECUTION meanwhile), log
paging with a header on the first page and `lineNum=1` past EOF, and rerun/stop actions.

Runs never wait for real time: `advance(seconds)` moves the clock and plays every event that fell
due, in time order, so a test reads the same states every time. Scenarios are data (`Scenario`)
attached to each seeded definition; faults (5xx, slow answers) are queued with `fail()`/`slow()`.

    sim = DolphinSimulator([SimProject("etl", 1000000000001, [SimDefinition("order_sync", 2000000000001)])])
    with sim:
        client = DolphinClient(sim.url, token=sim.token)
"""

from __future__ import annotations

import heapq
import itertools
import json
import re
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import unquote

from agent.clock import FakeClock
from integrations.fakes.loopback import LoopbackServer, Request, Response

DS_TIME = "%Y-%m-%d %H:%M:%S"
_WF_CODES = {
    "SUBMITTED_SUCCESS": (0, "submit success"),
    "RUNNING_EXECUTION": (1, "running"),
    "READY_PAUSE": (2, "ready pause"),
    "PAUSE": (3, "pause"),
    "READY_STOP": (4, "ready stop"),
    "STOP": (5, "stop"),
    "FAILURE": (6, "failure"),
    "SUCCESS": (7, "success"),
    "DELAY_EXECUTION": (12, "delay execution"),
    "SERIAL_WAIT": (14, "serial wait"),
    "READY_BLOCK": (15, "ready block"),
    "BLOCK": (16, "block"),
    "WAIT_TO_RUN": (17, "wait to run"),
    "FAILOVER": (18, "failover"),
}
_WF_FINAL = {"SUCCESS", "FAILURE", "STOP", "PAUSE", "BLOCK"}

# The names each version uses (kept apart from the client's profiles on purpose: if the client
# got a name wrong, a shared table would hide it).
_NAMES: dict[str, dict[str, str]] = {
    "3.1": {
        "defs": "process-definition",
        "insts": "process-instances",
        "start": "start-process-instance",
        "start_code": "processDefinitionCode",
        "list_def": "processDefineCode",
        "inst_param": "processInstanceId",
        "def_field": "processDefinitionCode",
        "def_version": "processDefinitionVersion",
        "task_inst": "processInstanceId",
        "task_inst_name": "processInstanceName",
        "tasks_state": "processInstanceState",
        "priority": "processInstancePriority",
        "is_sub": "isSubProcess",
        "dag_def": "processDefinition",
        "dag_rel": "processTaskRelationList",
    },
}
_NAMES["3.2"] = dict(_NAMES["3.1"])
_NAMES["3.3"] = {
    "defs": "workflow-definition",
    "insts": "workflow-instances",
    "start": "start-workflow-instance",
    "start_code": "workflowDefinitionCode",
    "list_def": "workflowDefinitionCode",
    "inst_param": "workflowInstanceId",
    "def_field": "workflowDefinitionCode",
    "def_version": "workflowDefinitionVersion",
    "task_inst": "workflowInstanceId",
    "task_inst_name": "workflowInstanceName",
    "tasks_state": "workflowInstanceState",
    "priority": "workflowInstancePriority",
    "is_sub": "isSubWorkflow",
    "dag_def": "workflowDefinition",
    "dag_rel": "workflowTaskRelationList",
}


@dataclass(frozen=True)
class Scenario:
    """How the runs of one definition play out; times are simulated seconds."""

    kind: str = "success"  # success | retry_then_success | fail | long_running
    fail_task: int = -1  # index of the task that fails (default: the last)
    max_retry_times: int = 1
    retry_interval_minutes: int = 1
    task_seconds: float = 60.0
    host: str = "10.0.0.7:1234"  # worker host of every task
    wait_state: str | None = None  # SERIAL_WAIT | DELAY_EXECUTION | WAIT_TO_RUN before running
    wait_seconds: float = 0.0
    fail_dates: frozenset[str] = frozenset()  # backfill dates ("2026-12-01") whose run fails
    error: str = "java.sql.SQLException: Connection refused (order_db:3306)"
    log_lines: int = 20  # lines of ordinary output per attempt
    stop_seconds: float = 5.0  # READY_STOP lasts this long


@dataclass
class SimDefinition:
    """A seeded workflow definition: a chain of tasks that runs one after the other."""

    name: str
    code: int
    online: bool = True
    tasks: tuple[str, ...] = ("extract", "transform", "load")
    scenario: Scenario = field(default_factory=Scenario)
    version: int = 1


@dataclass
class SimProject:
    """A seeded project."""

    name: str
    code: int
    definitions: list[SimDefinition] = field(default_factory=list)


@dataclass
class SimTask:
    """One task instance row."""

    id: int
    name: str
    code: int
    index: int
    instance_id: int
    state: str
    retry_times: int
    max_retry_times: int
    retry_interval: int
    submit_time: datetime
    first_submit_time: datetime
    host: str | None = None
    log_path: str | None = None
    start_time: datetime | None = None
    end_time: datetime | None = None
    flag: str = "YES"
    log: list[str] = field(default_factory=list)


@dataclass
class SimInstance:
    """One workflow instance and where it is in its timeline."""

    id: int
    project: SimProject
    definition: SimDefinition
    state: str
    command_type: str
    start_time: datetime
    schedule_time: datetime | None
    start_params: dict[str, str]
    executor: str
    trigger_code: int | None
    remaining_dates: list[datetime]
    fails: bool
    end_time: datetime | None = None
    run_times: int = 1
    tasks: list[SimTask] = field(default_factory=list)
    task_index: int = 0
    phase: str = ""
    gen: int = 0
    reruns: int = 0
    restart_time: datetime | None = None
    command_start: datetime | None = None
    version: int = 1  # the definition version it runs, and that version's tasks
    dag_tasks: tuple[str, ...] = ()


@dataclass
class Fault:
    """An injected transport fault for requests whose path contains `path_contains`."""

    path_contains: str
    status: int = 500
    delay: float = 0.0
    times: int = 1


class _Reply(Exception):
    """Internal: answer the request with this envelope (business errors are HTTP 200)."""

    def __init__(self, code: int, msg: str, status: int = 200) -> None:
        super().__init__(msg)
        self.code, self.msg, self.status = code, msg, status


def _fmt(value: datetime | None) -> str | None:
    return value.astimezone(UTC).strftime(DS_TIME) if value else None


def _fmt_naive(value: datetime | None) -> str | None:
    return value.strftime(DS_TIME) if value else None


def _thousands(n: int) -> str:
    return f"{n:,}"  # MessageFormat puts separators in numbers


def _duration(start: datetime | None, end: datetime | None, now: datetime) -> str | None:
    if start is None:
        return None
    seconds = max(int(((end or now) - start).total_seconds()), 1)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    parts = [f"{h}h" if h else "", f"{m}m" if m else "", f"{s}s" if s else ""]
    return " ".join(p for p in parts if p) or "1s"


class DolphinSimulator:
    """A DolphinScheduler API server on loopback, driven by a FakeClock."""

    def __init__(
        self,
        projects: list[SimProject],
        *,
        version: str = "3.2",
        clock: FakeClock | None = None,
        token: str = "sim-token-0123456789abcdef",
        token_ttl_seconds: float = 86400 * 365,
        users: dict[str, str] | None = None,
        command_delay: float = 2.0,
        session_ttl: float = 7200.0,
        master_host: str = "10.0.0.5:5678",
    ) -> None:
        if version not in _NAMES:
            raise ValueError(f"unknown version {version!r}")
        self.version = version
        self.names = _NAMES[version]
        self.clock = clock or FakeClock()
        self.projects = {p.code: p for p in projects}
        self.token = token
        self.tokens: dict[str, datetime] = {token: self.clock() + timedelta(seconds=token_ttl_seconds)}
        self.users = dict(users or {"admin": "dolphinscheduler123"})
        self.sessions: dict[str, tuple[str, datetime]] = {}  # user -> (session id, login time)
        self.command_delay = command_delay
        self.session_ttl = session_ttl
        self.master_host = master_host
        self.instances: dict[int, SimInstance] = {}
        self.tasks: dict[int, SimTask] = {}
        self.starts: list[dict[str, str]] = []  # form of every accepted start request
        self.counts: Counter[str] = Counter()
        self.faults: list[Fault] = []
        self._events: list[tuple[datetime, int, Callable[[datetime], None]]] = []
        self._seq = itertools.count()
        self._ids = itertools.count(101)
        self._task_ids = itertools.count(5001)
        self._triggers = itertools.count(11964055605440)
        self._sessions_made = itertools.count(1)
        self._lock = threading.RLock()
        self.server = LoopbackServer(self._handle)

    # ---- lifecycle and control -----------------------------------------------------------------

    @property
    def url(self) -> str:
        """Base URL a client uses, ending in /dolphinscheduler."""
        return self.server.url + "/dolphinscheduler"

    def start(self) -> DolphinSimulator:
        """Start serving."""
        self.server.start()
        return self

    def stop(self) -> None:
        """Stop serving."""
        self.server.stop()

    def __enter__(self) -> DolphinSimulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def advance(self, seconds: float) -> datetime:
        """Move the clock forward and play every event that fell due, in order."""
        with self._lock:
            self.clock.advance(seconds)
            self._tick()
            return self.clock()

    def fail(self, path_contains: str, status: int = 500, times: int = 1) -> None:
        """Answer the next `times` matching requests with HTTP `status` (after doing nothing)."""
        self.faults.append(Fault(path_contains, status=status, times=times))

    def slow(self, path_contains: str, seconds: float, times: int = 1) -> None:
        """Process the next `times` matching requests normally but answer after `seconds` of real time."""
        self.faults.append(Fault(path_contains, status=0, delay=seconds, times=times))

    def expire_token(self, token: str | None = None) -> None:
        """Make a token expire now (the next request with it gets 401)."""
        self.tokens[token or self.token] = self.clock() - timedelta(seconds=1)

    def expire_sessions(self) -> None:
        """Drop every login session (as after the session timeout)."""
        self.sessions.clear()

    def reset_counts(self) -> None:
        """Forget the request counters."""
        self.counts.clear()

    def definition(self, name: str) -> SimDefinition:
        """Look a seeded definition up by name."""
        for project in self.projects.values():
            for d in project.definitions:
                if d.name == name:
                    return d
        raise KeyError(name)

    def set_online(self, name: str, online: bool) -> None:
        """Release or take offline a definition."""
        self.definition(name).online = online

    def instances_of(self, name: str) -> list[SimInstance]:
        """Instances of a definition, oldest first."""
        return sorted((i for i in self.instances.values() if i.definition.name == name), key=lambda i: i.id)

    def run_directly(
        self, definition: str, *, schedule: datetime | None = None, marker: str = "", executor: str = "admin"
    ) -> SimInstance:
        """Create a running instance now without a start request (cron runs, bench set-up)."""
        with self._lock:
            project, d = self._find_def_by_name(definition)
            params = {"xihe_run": marker} if marker else {}
            return self._create_instance(
                project,
                d,
                self.clock(),
                schedule,
                [],
                params,
                executor,
                None,
                "SCHEDULER" if not marker else "START_PROCESS",
            )

    # ---- the event engine -----------------------------------------------------------------------

    def _at(self, when: datetime, action: Callable[[datetime], None]) -> None:
        heapq.heappush(self._events, (when, next(self._seq), action))

    def _tick(self) -> None:
        now = self.clock()
        while self._events and self._events[0][0] <= now:
            when, _, action = heapq.heappop(self._events)
            action(when)

    def _schedule(self, inst: SimInstance, when: datetime, phase: str) -> None:
        inst.gen += 1
        inst.phase = phase
        gen = inst.gen

        def fire(at: datetime) -> None:
            if inst.gen == gen:  # superseded by a stop or rerun
                self._step(inst, at)

        self._at(when, fire)

    def _find_def_by_name(self, name: str) -> tuple[SimProject, SimDefinition]:
        for project in self.projects.values():
            for d in project.definitions:
                if d.name == name:
                    return project, d
        raise KeyError(name)

    def _create_instance(
        self,
        project: SimProject,
        d: SimDefinition,
        at: datetime,
        schedule: datetime | None,
        remaining: list[datetime],
        params: dict[str, str],
        executor: str,
        trigger: int | None,
        command_type: str,
    ) -> SimInstance:
        sc = d.scenario
        fails = sc.kind == "fail" or (schedule is not None and schedule.strftime("%Y-%m-%d") in sc.fail_dates)
        inst = SimInstance(
            id=next(self._ids),
            project=project,
            definition=d,
            state="SUBMITTED_SUCCESS",
            command_type=command_type,
            start_time=at,
            schedule_time=schedule,
            start_params=params,
            executor=executor,
            trigger_code=trigger,
            remaining_dates=remaining,
            fails=fails,
            restart_time=at,
            command_start=at,
            version=d.version,
            dag_tasks=d.tasks,
        )
        self.instances[inst.id] = inst
        if sc.wait_state:
            inst.state = sc.wait_state
            self._schedule(inst, at + timedelta(seconds=sc.wait_seconds), "begin")
        else:
            self._begin(inst, at)
        return inst

    def _begin(self, inst: SimInstance, at: datetime) -> None:
        inst.state = "RUNNING_EXECUTION"
        self._new_task_row(inst, inst.task_index, 0, at)
        self._schedule(inst, at + timedelta(seconds=1), "dispatch")

    def _new_task_row(self, inst: SimInstance, index: int, retry: int, at: datetime) -> SimTask:
        d = inst.definition
        first = next((t.first_submit_time for t in inst.tasks if t.index == index), at)
        task = SimTask(
            id=next(self._task_ids),
            name=d.tasks[index],
            code=d.code * 10 + index,
            index=index,
            instance_id=inst.id,
            state="SUBMITTED_SUCCESS",
            retry_times=retry,
            max_retry_times=d.scenario.max_retry_times,
            retry_interval=d.scenario.retry_interval_minutes,
            submit_time=at,
            first_submit_time=first,
        )
        inst.tasks.append(task)
        self.tasks[task.id] = task
        return task

    def _current(self, inst: SimInstance) -> SimTask | None:
        rows = [t for t in inst.tasks if t.flag == "YES" and t.index == inst.task_index]
        return rows[-1] if rows else None

    def _step(self, inst: SimInstance, at: datetime) -> None:
        sc = inst.definition.scenario
        task = self._current(inst)
        if inst.phase == "begin":
            self._begin(inst, at)
        elif inst.phase == "dispatch" and task is not None:
            task.state, task.host, task.start_time = "RUNNING_EXECUTION", sc.host, at
            task.log_path = (
                f"/opt/ds/worker-server/logs/{at:%Y%m%d}/{inst.definition.code}/{inst.id}/{task.id}.log"
            )
            task.log = [f"[INFO] {_fmt(at)} - Begin to execute task: {task.name}"]
            task.log += [
                f"[INFO] {_fmt(at)} - {task.name}: processed batch {i + 1}" for i in range(sc.log_lines)
            ]
            seconds = 10**7 if sc.kind == "long_running" else sc.task_seconds
            self._schedule(inst, at + timedelta(seconds=seconds), "finish")
        elif inst.phase == "finish" and task is not None:
            task.end_time = at
            if self._attempt_fails(inst, task):
                task.state = "FAILURE"
                task.log += [
                    f"[ERROR] {_fmt(at)} - {task.name} failed: {sc.error}",
                    f"[INFO] {_fmt(at)} - FINALIZE_SESSION, exit code 1",
                ]
                if task.retry_times < task.max_retry_times:
                    # the workflow stays RUNNING_EXECUTION while a retry is pending (§11)
                    self._schedule(inst, at + timedelta(minutes=task.retry_interval), "retry")
                else:
                    self._finish(inst, "FAILURE", at)
            else:
                task.state = "SUCCESS"
                task.log.append(f"[INFO] {_fmt(at)} - FINALIZE_SESSION, exit code 0")
                if inst.task_index + 1 < len(inst.definition.tasks):
                    inst.task_index += 1
                    self._new_task_row(inst, inst.task_index, 0, at)
                    self._schedule(inst, at + timedelta(seconds=1), "dispatch")
                else:
                    self._finish(inst, "SUCCESS", at)
        elif inst.phase == "retry" and task is not None:
            task.flag = "NO"
            self._new_task_row(inst, task.index, task.retry_times + 1, at)
            self._schedule(inst, at + timedelta(seconds=1), "dispatch")
        elif inst.phase == "stop":
            for t in inst.tasks:
                if t.flag == "YES" and t.state not in ("SUCCESS", "FAILURE", "KILL"):
                    t.state, t.end_time = "KILL", at
                    t.log.append(f"[INFO] {_fmt(at)} - process has been killed")
            self._finish(inst, "STOP", at)

    def _attempt_fails(self, inst: SimInstance, task: SimTask) -> bool:
        sc = inst.definition.scenario
        fail_index = sc.fail_task % len(inst.definition.tasks)
        if inst.reruns or task.index != fail_index:
            return False
        if inst.fails:
            return True
        return sc.kind == "retry_then_success" and task.retry_times == 0

    def _finish(self, inst: SimInstance, state: str, at: datetime) -> None:
        inst.state, inst.end_time, inst.phase = state, at, ""
        inst.gen += 1
        if state == "SUCCESS" and inst.remaining_dates:
            # serial backfill: the next date starts only after this one ended SUCCESS
            nxt, rest = inst.remaining_dates[0], inst.remaining_dates[1:]

            def create(when: datetime) -> None:
                self._create_instance(
                    inst.project,
                    inst.definition,
                    when,
                    nxt,
                    rest,
                    inst.start_params,
                    inst.executor,
                    inst.trigger_code,
                    "COMPLEMENT_DATA",
                )

            self._at(at + timedelta(seconds=1), create)
        inst.remaining_dates = []

    # ---- HTTP ----------------------------------------------------------------------------------

    def _handle(self, req: Request) -> Response:
        with self._lock:
            self._tick()
            path = unquote(req.path)
            self.counts[req.method + " " + re.sub(r"/-?\d+", "/{n}", path)] += 1
            delay = 0.0
            for fault in self.faults:
                if fault.times > 0 and fault.path_contains in path:
                    fault.times -= 1
                    if fault.status:
                        return Response(
                            fault.status,
                            b"<html><body>502 Bad Gateway</body></html>",
                            {"Content-Type": "text/html"},
                        )
                    delay = fault.delay
                    break
            if not path.startswith("/dolphinscheduler/"):
                return Response(404)
            path = path[len("/dolphinscheduler") :]
            try:
                if path == "/login" and req.method == "POST":
                    return self._envelope(self._login(req.form()), delay)
                if not self._authenticated(req):
                    return Response(401, delay=delay)  # empty body by contract
                data = self._route(req.method, path, req.form())
                status = 201 if path == "/access-tokens" and req.method == "POST" else 200
                return self._envelope(data, delay, status)
            except _Reply as r:
                if r.status != 200:
                    return Response(r.status, delay=delay)
                body = {"code": r.code, "msg": r.msg, "data": None, "success": False, "failed": True}
                return Response.of_json(body, delay=delay)

    @staticmethod
    def _envelope(data: Any, delay: float, status: int = 200) -> Response:
        body = {"code": 0, "msg": "success", "data": data, "success": True, "failed": False}
        return Response.of_json(body, status=status, delay=delay)

    def _login(self, form: dict[str, str]) -> dict[str, str]:
        user, password = form.get("userName", ""), form.get("userPassword", "")
        if not user:
            raise _Reply(10004, "user name is null")
        if self.users.get(user) != password:
            raise _Reply(10013, "user name or password error")
        now = self.clock()
        held = self.sessions.get(user)
        if held and (now - held[1]).total_seconds() < self.session_ttl:
            return {"sessionId": held[0], "securityConfigType": "PASSWORD"}  # same id within 7200 s
        session_id = f"sess-{next(self._sessions_made):04d}-0000-0000-000000000000"
        self.sessions[user] = (session_id, now)
        return {"sessionId": session_id, "securityConfigType": "PASSWORD"}

    def _authenticated(self, req: Request) -> bool:
        now = self.clock()
        token = req.headers.get("token")
        if token:
            expiry = self.tokens.get(token)
            return expiry is not None and expiry > now
        session_id = req.headers.get("sessionid")
        if not session_id:
            cookies = req.headers.get("cookie", "")
            match = re.search(r"sessionId=([^;]+)", cookies)
            session_id = match.group(1) if match else None
        if not session_id:
            return False
        return any(
            sid == session_id and (now - at).total_seconds() < self.session_ttl
            for sid, at in self.sessions.values()
        )

    def _route(self, method: str, path: str, form: dict[str, str]) -> Any:
        n = self.names
        if method == "GET" and path == "/projects/list":
            return [self._project_json(p) for p in self.projects.values()]
        if method == "GET" and path == "/projects":
            return self._page(
                sorted(self.projects.values(), key=lambda p: -p.code),
                form,
                self._project_json,
                search=lambda p, s: s in p.name,
            )
        if path == "/log/detail" and method == "GET":
            return self._log(form)
        m = re.fullmatch(r"/projects/(-?\d+)(/.*)?", path)
        if not m:
            raise _Reply(0, "", status=404)
        rest = m.group(2) or ""
        if not rest.startswith(("/process-", "/workflow-", "/executors", "/task-instances")) and rest:
            raise _Reply(0, "", status=404)
        for prefix in ("/process-", "/workflow-"):
            if (
                rest.startswith(prefix)
                and not rest.startswith(f"/{n['defs']}")
                and not rest.startswith(f"/{n['insts']}")
            ):
                raise _Reply(0, "", status=404)  # the other profile's paths do not exist here
        project = self.projects.get(int(m.group(1)))
        if project is None:
            raise _Reply(10190, "This project was not found. Please refresh page.")
        if not rest and method == "GET":
            return self._project_json(project)
        if rest.startswith(f"/{n['defs']}"):
            return self._definitions(method, project, rest[len(n["defs"]) + 1 :], form)
        if rest.startswith(f"/{n['insts']}"):
            return self._instances(method, project, rest[len(n["insts"]) + 1 :], form)
        if rest == "/task-instances" and method == "GET":
            return self._task_instances(project, form)
        if rest == f"/executors/{n['start']}" and method == "POST":
            return self._start(project, form)
        if rest == "/executors/execute" and method == "POST":
            return self._execute(project, form)
        raise _Reply(0, "", status=404)

    # ---- JSON views ------------------------------------------------------------------------------

    def _project_json(self, p: SimProject) -> dict[str, Any]:
        return {
            "id": p.code % 1000,
            "userId": 1,
            "userName": "admin",
            "code": p.code,
            "name": p.name,
            "description": "",
            "createTime": "2026-01-01 00:00:00",
            "updateTime": "2026-01-01 00:00:00",
            "perm": 7,
            "defCount": len(p.definitions),
            "instRunningCount": 0,
        }

    def _definition_json(self, p: SimProject, d: SimDefinition) -> dict[str, Any]:
        return {
            "id": d.code % 100000,
            "code": d.code,
            "name": d.name,
            "version": d.version,
            "releaseState": "ONLINE" if d.online else "OFFLINE",
            "projectCode": p.code,
            "description": "",
            "globalParams": "[]",
            "globalParamList": [],
            "globalParamMap": {},
            "createTime": "2026-01-01 00:00:00",
            "updateTime": "2026-01-01 00:00:00",
            "flag": "YES",
            "userId": 1,
            "userName": "admin",
            "projectName": p.name,
            "locations": None,
            "scheduleReleaseState": None,
            "schedule": None,
            "timeout": 0,
            "modifyBy": "admin",
            "warningGroupId": None,
            "executionType": "PARALLEL",
        }

    def _dag_json(
        self, p: SimProject, d: SimDefinition, version: int, tasks: tuple[str, ...]
    ) -> dict[str, Any]:
        """DagData of one definition version: a chain of tasks, one relation per task (root: pre 0)."""
        n, codes = self.names, [d.code * 10 + i for i in range(len(tasks))]
        stamp = "2026-01-01 00:00:00"
        relations: list[dict[str, Any]] = [
            {
                "id": d.code % 100000 * 10 + i,
                "name": "",
                n["def_version"]: version,
                "projectCode": p.code,
                n["def_field"]: d.code,
                "preTaskCode": codes[i - 1] if i else 0,
                "preTaskVersion": 1 if i else 0,
                "postTaskCode": code,
                "postTaskVersion": 1,
                "conditionType": "NONE",
                "conditionParams": {},
                "createTime": stamp,
                "updateTime": stamp,
            }
            for i, code in enumerate(codes)
        ]
        task_defs: list[dict[str, Any]] = [
            {
                "id": code % 100000,
                "code": code,
                "name": name,
                "version": 1,
                "description": "",
                "projectCode": p.code,
                "userId": 1,
                "taskType": "SHELL",
                "taskParams": {"rawScript": f"run {name}", "localParams": [], "resourceList": []},
                "flag": "YES",
                "taskPriority": "MEDIUM",
                "workerGroup": "default",
                "environmentCode": -1,
                "failRetryTimes": d.scenario.max_retry_times,
                "failRetryInterval": d.scenario.retry_interval_minutes,
                "timeoutFlag": "CLOSE",
                "timeout": 0,
                "delayTime": 0,
                "taskExecuteType": "BATCH",
                "createTime": stamp,
                "updateTime": stamp,
            }
            for code, name in zip(codes, tasks, strict=True)
        ]
        definition = {**self._definition_json(p, d), "version": version}
        return {n["dag_def"]: definition, n["dag_rel"]: relations, "taskDefinitionList": task_defs}

    def _instance_json(self, inst: SimInstance, *, view: str) -> dict[str, Any]:
        """view: list | detail | trigger; 3.1 list rows carry no params, executorName only in lists."""
        n, now = self.names, self.clock()
        props = [
            {"prop": k, "direct": "IN", "type": "VARCHAR", "value": v} for k, v in inst.start_params.items()
        ]
        if self.version == "3.3":
            command_param: dict[str, Any] = {"commandParams": props}
        else:
            command_param = {"StartParams": dict(inst.start_params)}
        if inst.schedule_time is not None:
            command_param["complementScheduleDateList"] = _fmt_naive(inst.schedule_time)
        row: dict[str, Any] = {
            "id": inst.id,
            "name": f"{inst.definition.name}-{inst.version}-"
            f"{inst.start_time.astimezone(UTC):%Y%m%d%H%M%S}{inst.start_time.microsecond // 1000:03d}",
            n["def_field"]: inst.definition.code,
            n["def_version"]: inst.version,
            "projectCode": inst.project.code,
            "state": inst.state,
            "recovery": "NO",
            "startTime": _fmt(inst.start_time),
            "endTime": _fmt(inst.end_time),
            "runTimes": inst.run_times,
            "host": self.master_host,
            "commandType": inst.command_type,
            "commandParam": json.dumps(command_param),
            "taskDependType": "TASK_POST",
            "failureStrategy": "END",
            "warningType": "NONE",
            "warningGroupId": None,
            "scheduleTime": _fmt_naive(inst.schedule_time),
            "commandStartTime": _fmt(inst.command_start),
            "globalParams": json.dumps(props),
            "executorId": 1,
            "executorName": inst.executor if view == "list" else None,
            "tenantCode": "default",
            n["is_sub"]: "NO",
            "historyCmd": inst.command_type,
            "duration": _duration(inst.start_time, inst.end_time, now) if view == "list" else None,
            n["priority"]: "MEDIUM",
            "workerGroup": "default",
            "environmentCode": -1,
            "timeout": 0,
            "dryRun": 0,
            "testFlag": 0,
            "restartTime": _fmt(inst.restart_time),
            "stateHistory": "[]",
            "complementData": inst.schedule_time is not None,
            "blocked": False,
        }
        if self.version == "3.1" and view == "list":
            for key in ("commandParam", "globalParams"):
                row.pop(key)  # the 3.1.9 list SQL does not select them (§6, §15.3)
            row["complementData"] = False
        if view == "detail":  # the DAG of the version this run uses
            row["dagData"] = self._dag_json(inst.project, inst.definition, inst.version, inst.dag_tasks)
            row["locations"] = None
        return row

    def _task_json(self, t: SimTask, *, with_duration: bool) -> dict[str, Any]:
        n, inst = self.names, self.instances[t.instance_id]
        return {
            "id": t.id,
            "name": t.name,
            "taskType": "SHELL",
            n["task_inst"]: t.instance_id,
            n["task_inst_name"]: self._instance_json(inst, view="trigger")["name"],
            "projectCode": inst.project.code,
            "taskCode": t.code,
            "taskDefinitionVersion": 1,
            "state": t.state,
            "firstSubmitTime": _fmt(t.first_submit_time),
            "submitTime": _fmt(t.submit_time),
            "startTime": _fmt(t.start_time),
            "endTime": _fmt(t.end_time),
            "host": t.host,
            "logPath": t.log_path,
            "retryTimes": t.retry_times,
            "maxRetryTimes": t.max_retry_times,
            "retryInterval": t.retry_interval,
            "flag": t.flag,
            "alertFlag": "NO",
            "pid": 4000 + t.id % 1000,
            "taskInstancePriority": "MEDIUM",
            "workerGroup": "default",
            "executorName": inst.executor,
            "delayTime": 0,
            "dryRun": 0,
            "taskExecuteType": "BATCH",
            "testFlag": 0,
            "duration": _duration(t.start_time, t.end_time, self.clock()) if with_duration else None,
        }

    def _page(
        self,
        rows: list[Any],
        form: dict[str, str],
        render: Callable[[Any], dict[str, Any]],
        search: Callable[[Any, str], bool] | None = None,
    ) -> dict[str, Any]:
        try:
            page_no, page_size = int(form.get("pageNo", "")), int(form.get("pageSize", ""))
        except ValueError:
            raise _Reply(10001, "request parameter pageNo is not valid") from None
        if page_no <= 0 or page_size <= 0:
            raise _Reply(10001, f"request parameter {'pageNo' if page_no <= 0 else 'pageSize'} is not valid")
        term = form.get("searchVal")
        if term and search:
            rows = [r for r in rows if search(r, term)]
        total = len(rows)
        offset = (page_no - 1) * page_size
        return {
            "totalList": [render(r) for r in rows[offset : offset + page_size]],
            "total": total,
            "totalPage": (total + page_size - 1) // page_size if total else 0,
            "pageSize": page_size,
            "currentPage": page_no,
            "pageNo": offset,
        }

    def _parse_time(self, value: str | None, key: str) -> datetime | None:
        if not value:
            return None
        try:
            return datetime.strptime(value, DS_TIME).replace(tzinfo=UTC)
        except ValueError:
            raise _Reply(10001, f"request parameter {key} is not valid") from None

    # ---- definitions ---------------------------------------------------------------------------

    def _definitions(self, method: str, p: SimProject, rest: str, form: dict[str, str]) -> Any:
        if method == "GET" and rest == "":
            return self._page(
                list(reversed(p.definitions)),
                form,
                lambda d: self._definition_json(p, d),
                search=lambda d, s: s in d.name,
            )
        if method == "GET" and rest == "/simple-list":
            return [
                {"id": d.code % 100000, "code": d.code, "name": d.name, "projectCode": p.code}
                for d in p.definitions
            ]
        if method == "GET" and rest == "/query-by-name":
            for d in p.definitions:
                if d.name == form.get("name"):
                    return self._dag_json(p, d, d.version, d.tasks)
            raise _Reply(50003, f"process definition {form.get('name')} does not exist")
        m = re.fullmatch(r"/(\d+)(/release)?", rest)
        if m:
            hit = next((x for x in p.definitions if x.code == int(m.group(1))), None)
            if hit is None:
                raise _Reply(50003, f"process definition {_thousands(int(m.group(1)))} does not exist")
            d = hit
            if m.group(2) and method == "POST":
                d.online = form.get("releaseState") == "ONLINE"
                return True
            if method == "GET":
                return self._dag_json(p, d, d.version, d.tasks)
        raise _Reply(0, "", status=404)

    # ---- instances -----------------------------------------------------------------------------

    def _instances(self, method: str, p: SimProject, rest: str, form: dict[str, str]) -> Any:
        n = self.names
        if method != "GET":
            raise _Reply(0, "", status=405)
        if rest == "":
            rows = [i for i in self.instances.values() if i.project is p]
            code = int(form.get(n["list_def"]) or 0)
            if code:
                rows = [i for i in rows if i.definition.code == code]
            if form.get("stateType"):
                rows = [i for i in rows if i.state == form["stateType"]]
            if form.get("host"):
                rows = [
                    i for i in rows if form["host"] in self.master_host
                ]  # master host, not worker (§15.2)
            start = self._parse_time(form.get("startDate"), "startDate")
            end = self._parse_time(form.get("endDate"), "endDate")
            rows = [
                i
                for i in rows
                if (start is None or i.start_time >= start) and (end is None or i.start_time <= end)
            ]
            rows.sort(
                key=lambda i: (i.start_time, i.end_time or datetime.max.replace(tzinfo=UTC), i.id),
                reverse=True,
            )
            return self._page(
                rows,
                form,
                lambda i: self._instance_json(i, view="list"),
                search=lambda i, s: s in i.definition.name,
            )
        if rest == "/trigger" and self.version == "3.2":
            code = int(form.get("triggerCode") or 0)
            return [
                self._instance_json(i, view="trigger")
                for i in self.instances.values()
                if i.project is p and i.trigger_code == code
            ]
        m = re.fullmatch(r"/(-?\d+)(/tasks)?", rest)
        if not m:
            raise _Reply(10001, "request parameter id is not valid")
        inst = self.instances.get(int(m.group(1)))
        label = "workflow" if self.version == "3.3" else "process"
        if inst is None:
            raise _Reply(50001, f"{label} instance {_thousands(int(m.group(1)))} does not exist")
        if inst.project is not p:
            raise _Reply(50003, f"{label} definition {inst.definition.code} does not exist")
        if not m.group(2):
            return self._instance_json(inst, view="detail")
        current = [t for t in inst.tasks if t.flag == "YES"]
        current.sort(key=lambda t: (t.start_time or datetime.max.replace(tzinfo=UTC), t.id), reverse=True)
        code, desc = _WF_CODES[inst.state]
        state = (
            inst.state if self.version == "3.3" else f"WorkflowExecutionStatus{{code={code}, desc='{desc}'}}"
        )
        return {
            n["tasks_state"]: state,
            "taskList": [self._task_json(t, with_duration=False) for t in current],
        }

    def _task_instances(self, p: SimProject, form: dict[str, str]) -> Any:
        n = self.names
        rows = [t for t in self.tasks.values() if self.instances[t.instance_id].project is p]
        inst_id = int(form.get(n["inst_param"]) or 0)
        if inst_id:
            rows = [t for t in rows if t.instance_id == inst_id]
        if form.get("host"):
            rows = [t for t in rows if t.host and form["host"] in t.host]
        if form.get("stateType"):
            rows = [t for t in rows if t.state == form["stateType"]]
        if form.get("taskName"):
            rows = [t for t in rows if t.name == form["taskName"]]
        start = self._parse_time(form.get("startDate"), "startDate")
        end = self._parse_time(form.get("endDate"), "endDate")
        rows = [
            t
            for t in rows
            if (start is None or (t.start_time and t.start_time >= start))
            and (end is None or (t.start_time and t.start_time <= end))
        ]
        rows.sort(key=lambda t: (t.submit_time, t.id), reverse=True)
        return self._page(
            rows, form, lambda t: self._task_json(t, with_duration=True), search=lambda t, s: s in t.name
        )

    # ---- start and actions ---------------------------------------------------------------------

    def _start_error(self, code: int, detail: str) -> _Reply:
        if self.version == "3.3":
            if code == 50014:
                return _Reply(50014, f"start workflow instance error:{detail}")
            return _Reply(code, detail)
        return _Reply(code, "start process instance error" if code == 50014 else detail)

    def _start(self, p: SimProject, form: dict[str, str]) -> Any:
        n = self.names
        for key in (n["start_code"], "failureStrategy", "warningType") + (
            ("scheduleTime",) if self.version != "3.3" else ()
        ):
            if key not in form:
                raise self._start_error(50014, f"Required request parameter '{key}' is not present")
        try:
            code = int(form[n["start_code"]])
        except ValueError:
            raise self._start_error(50014, "bad definition code") from None
        if self.version == "3.2" and int(form.get("expectedParallelismNumber") or 1) <= 0:
            raise _Reply(50080, "task parallelism parameter is not valid")
        found = [(pp, d) for pp in self.projects.values() for d in pp.definitions if d.code == code]
        if not found:
            if self.version == "3.3":
                raise _Reply(10000, f"Internal Server Error: workflow definition {code} not found")
            raise self._start_error(50014, "NullPointerException")
        project, d = found[0]
        if project is not p:
            raise _Reply(50003, f"process definition {_thousands(code)} does not exist")
        if not d.online:
            if self.version == "3.3":
                raise self._start_error(50014, " The workflowDefinition should be online")
            raise _Reply(
                50004, f"process definition {_thousands(code)} process version {d.version} not online"
            )
        exec_type = form.get("execType") or "START_PROCESS"
        dates: list[datetime] = []
        if exec_type == "COMPLEMENT_DATA":
            dates = self._order(self._complement_dates(form.get("scheduleTime", "")), form)
        try:
            parsed = json.loads(form.get("startParams") or "{}")
            params = {str(k): str(v) for k, v in parsed.items()} if isinstance(parsed, dict) else {}
        except ValueError:
            params = {}  # invalid JSON is silently ignored
        self.starts.append(dict(form))
        now = self.clock()
        trigger = next(self._triggers) if self.version == "3.2" else None
        command_type = "COMPLEMENT_DATA" if dates else "START_PROCESS"
        first, rest = (dates[0], dates[1:]) if dates else (None, [])
        if self.version == "3.3":  # synchronous RPC: the id exists on return
            inst = self._create_instance(p, d, now, first, rest, params, "admin", None, command_type)
            return [inst.id]

        def consume(at: datetime) -> None:
            self._create_instance(p, d, at, first, rest, params, "admin", trigger, command_type)

        self._at(now + timedelta(seconds=self.command_delay), consume)
        return trigger  # None in 3.1: the call only inserts a command row

    def _complement_dates(self, text: str) -> list[datetime]:
        try:
            data = json.loads(text)
            if not isinstance(data, dict):
                raise ValueError("not an object")
            if "complementScheduleDateList" in data:
                raw = [s.strip() for s in str(data["complementScheduleDateList"]).split(",") if s.strip()]
                dates = sorted({datetime.strptime(s, DS_TIME) for s in raw})
                if len(dates) > 100 and self.version != "3.3":
                    raise _Reply(1400003, "The number of complement dates exceed 100.")
            else:
                start = datetime.strptime(data["complementStartDate"], DS_TIME)
                end = datetime.strptime(data["complementEndDate"], DS_TIME)
                if start > end:
                    raise ValueError("start after end")
                dates, day = [], start
                while day <= end:  # inclusive on both ends, default daily cron
                    dates.append(day)
                    day += timedelta(days=1)
        except (ValueError, KeyError, TypeError):
            if self.version == "3.3":
                raise _Reply(10000, "Internal Server Error: cannot parse backfill time") from None
            raise self._start_error(50014, "bad complement json") from None
        if not dates:
            raise _Reply(50081, "The range of date for complementing date is not valid")
        return dates

    def _order(self, dates: list[datetime], form: dict[str, str]) -> list[datetime]:
        order = form.get("executionOrder")
        if self.version == "3.1":
            return dates  # always ascending
        if self.version == "3.2":
            return dates if order == "ASC_ORDER" else list(reversed(dates))
        return list(reversed(dates)) if order == "DESC_ORDER" else dates

    def _execute(self, p: SimProject, form: dict[str, str]) -> Any:
        n = self.names
        try:
            inst_id = int(form.get(n["inst_param"]) or "")
        except ValueError:
            raise _Reply(50015, "execute process instance error") from None
        action = form.get("executeType", "")
        inst = self.instances.get(inst_id)
        label = "workflow" if self.version == "3.3" else "process"
        if inst is None:
            raise _Reply(50001, f"{label} instance {_thousands(inst_id)} does not exist")
        if inst.project is not p:
            if self.version == "3.2":
                raise _Reply(50015, "execute process instance error")
            raise _Reply(50003, f"{label} definition {inst.definition.code} does not exist")
        allowed = {
            "START_FAILURE_TASK_PROCESS": {"FAILURE"},
            "STOP": {"RUNNING_EXECUTION", "READY_PAUSE"},
            "REPEAT_RUNNING": _WF_FINAL,
        }.get(action)
        if allowed is not None and action == "STOP" and self.version == "3.3":
            allowed = allowed | {"READY_STOP", "SERIAL_WAIT", "WAIT_TO_RUN"}
        if allowed is None:
            raise _Reply(10001, "request parameter executeType is not valid")
        if inst.state not in allowed:
            if self.version == "3.1":
                code, desc = _WF_CODES[inst.state]
                raise _Reply(
                    50006,
                    f"the status of process instance {inst_id} is "
                    f"WorkflowExecutionStatus{{code={code}, desc='{desc}'}},Cannot perform {action} operation",
                )
            if self.version == "3.2":
                raise _Reply(50015, "execute process instance error")
            raise _Reply(
                10000, f"Internal Server Error: The workflow instance state is {inst.state}, cannot {action}"
            )
        now = self.clock()
        if action == "STOP":
            inst.state, inst.command_type = "READY_STOP", "STOP"
            inst.remaining_dates = []
            self._schedule(inst, now + timedelta(seconds=inst.definition.scenario.stop_seconds), "stop")
        elif action == "START_FAILURE_TASK_PROCESS":

            def consume(at: datetime) -> None:  # asynchronous: the state stays FAILURE until then
                inst.run_times += 1
                inst.reruns += 1
                inst.command_type = "START_FAILURE_TASK_PROCESS"
                inst.state, inst.end_time, inst.restart_time = "RUNNING_EXECUTION", None, at
                failed = [t for t in inst.tasks if t.flag == "YES" and t.state in ("FAILURE", "KILL")]
                for t in failed:
                    t.flag = "NO"
                inst.task_index = min((t.index for t in failed), default=inst.task_index)
                self._new_task_row(inst, inst.task_index, 0, at)
                self._schedule(inst, at + timedelta(seconds=1), "dispatch")

            self._at(now + timedelta(seconds=self.command_delay), consume)
        return None

    # ---- logs ----------------------------------------------------------------------------------

    def _log(self, form: dict[str, str]) -> Any:
        try:
            task_id, skip, limit = (int(form[k]) for k in ("taskInstanceId", "skipLineNum", "limit"))
        except (KeyError, ValueError):
            raise _Reply(10001, "request parameter taskInstanceId is not valid") from None
        task = self.tasks.get(task_id)
        if task is None:
            raise _Reply(10008, "task instance not found")
        if not task.host:
            raise _Reply(10191, "task instance host is null")
        lines = task.log[skip : skip + limit]
        budget, chosen = 64 * 1024, list[str]()
        for line in lines:  # the worker stops early at about 64 KiB
            budget -= len(line) + 2
            if budget < 0 and chosen:
                break
            chosen.append(line)
        message = "\r\n".join(chosen)
        if skip == 0:
            gap = " " if self.version == "3.3" else "  "
            message = f"[LOG-PATH]: {task.log_path}, [HOST]:{gap}{task.host}\n" + message
        if not chosen and skip > 0:
            message = ""
        return {"lineNum": len(message.split("\r\n")), "message": message}
