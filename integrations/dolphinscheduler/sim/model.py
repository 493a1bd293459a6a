"""The simulated DolphinScheduler master: projects, definitions, instances, task rows and a timeline.

Everything here is version-neutral; `api.py` turns it into the 3.1 / 3.2 / 3.3 HTTP API. Runs never
wait for real time: `advance(seconds)` moves the clock and plays every event that fell due, in time
order, so a test reads the same states every time.

What the master does, as the reference describes it (§5, §10, §11):
- a start (3.1/3.2) or a rerun / repeat-running command is only a command row until the master
  consumes it `command_delay` seconds later; `slow_master(seconds)` makes it take longer, so an
  instance keeps its old FAILURE state, endTime and runTimes for several polls after a `/rerun`;
- a serial backfill runs one instance per date, the next only after the previous ended SUCCESS;
  a failed date keeps the rest of its chain, and a rerun of that date that ends SUCCESS goes on
  with the next date (same chain, same startParams marker);
- a task that fails with retries left gets a new row (old row flag=NO) while the workflow stays
  RUNNING_EXECUTION.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from xihe.agent.clock import FakeClock

WF_FINAL = frozenset({"SUCCESS", "FAILURE", "STOP", "PAUSE", "BLOCK"})


def fmt_utc(value: datetime | None) -> str | None:
    """`yyyy-MM-dd HH:mm:ss` in UTC (spring.jackson.time-zone default)."""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") if value else None


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
    outputs: dict[str, tuple[str, ...]] = field(default_factory=dict)  # task -> its OUT localParams
    reads: dict[str, tuple[str, ...]] = field(default_factory=dict)  # task -> `${prop}`s its script uses


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
    remaining_dates: list[datetime]  # the rest of a serial backfill chain after this date
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


class DolphinModel:
    """The master's state and timeline, driven by a FakeClock."""

    def __init__(
        self,
        projects: list[SimProject],
        *,
        clock: FakeClock | None = None,
        command_delay: float = 2.0,
        first_ids: tuple[int, int] = (101, 5001),
    ) -> None:
        self.clock = clock or FakeClock()
        self.projects = {p.code: p for p in projects}
        self.command_delay = command_delay
        self.master_delay: float | None = None  # slow master: commands wait this long instead
        self.instances: dict[int, SimInstance] = {}
        self.tasks: dict[int, SimTask] = {}
        self._events: list[tuple[datetime, int, Callable[[datetime], None]]] = []
        self._seq = itertools.count()
        # ids go on from `first_ids` (instance, task): a simulator started again over a kept store
        # continues where the last one stopped, as a real master's database would
        self.next_instance_id, self.next_task_id = first_ids
        self._lock = threading.RLock()

    # ---- control ------------------------------------------------------------------------------

    def advance(self, seconds: float) -> datetime:
        """Move the clock forward and play every event that fell due, in order."""
        with self._lock:
            self.clock.advance(seconds)
            self._tick()
            return self.clock()

    def slow_master(self, seconds: float | None) -> None:
        """Commands (3.1/3.2 starts, reruns, repeat-running) are consumed `seconds` after they are sent.

        None restores the normal `command_delay`.
        """
        self.master_delay = seconds

    def definition(self, name: str) -> SimDefinition:
        """Look a seeded definition up by name."""
        return self.find_definition(name)[1]

    def find_definition(self, name: str) -> tuple[SimProject, SimDefinition]:
        """The project and definition called `name`."""
        for project in self.projects.values():
            for d in project.definitions:
                if d.name == name:
                    return project, d
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
            project, d = self.find_definition(definition)
            params = {"xihe_run": marker} if marker else {}
            kind = "SCHEDULER" if not marker else "START_PROCESS"
            return self.create_instance(project, d, self.clock(), schedule, [], params, executor, None, kind)

    # ---- commands the API hands over ----------------------------------------------------------

    def consume_later(self, action: Callable[[datetime], None]) -> None:
        """Queue a command row; the master consumes it after the command delay."""
        delay = self.command_delay if self.master_delay is None else self.master_delay
        self._at(self.clock() + timedelta(seconds=delay), action)

    def _restart(self, inst: SimInstance, at: datetime, command: str) -> None:
        inst.run_times += 1
        inst.reruns += 1
        inst.command_type = command
        inst.state, inst.end_time, inst.restart_time = "RUNNING_EXECUTION", None, at

    # ---- the event engine -----------------------------------------------------------------------

    def _at(self, when: datetime, action: Callable[[datetime], None]) -> None:
        heapq.heappush(self._events, (when, next(self._seq), action))

    def _tick(self) -> None:
        now = self.clock()
        while self._events and self._events[0][0] <= now:
            _when, _, action = heapq.heappop(self._events)
            action(_when)

    def _schedule(self, inst: SimInstance, when: datetime, phase: str) -> None:
        inst.gen += 1
        inst.phase = phase
        gen = inst.gen

        def fire(at: datetime) -> None:
            if inst.gen == gen:  # superseded by a stop or rerun
                self._step(inst, at)

        self._at(when, fire)

    def create_instance(
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
        """The master creates an instance (for one date of a backfill) and starts it."""
        sc = d.scenario
        fails = sc.kind == "fail" or (schedule is not None and schedule.strftime("%Y-%m-%d") in sc.fail_dates)
        inst = SimInstance(
            id=self._instance_id(),
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

    def _instance_id(self) -> int:
        self.next_instance_id += 1
        return self.next_instance_id - 1

    def _task_id(self) -> int:
        self.next_task_id += 1
        return self.next_task_id - 1

    def _begin(self, inst: SimInstance, at: datetime) -> None:
        inst.state = "RUNNING_EXECUTION"
        self._new_task_row(inst, inst.task_index, 0, at)
        self._schedule(inst, at + timedelta(seconds=1), "dispatch")

    def _new_task_row(self, inst: SimInstance, index: int, retry: int, at: datetime) -> SimTask:
        d = inst.definition
        first = next((t.first_submit_time for t in inst.tasks if t.index == index), at)
        task = SimTask(
            id=self._task_id(),
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

    def paused_after_task(self, inst: SimInstance, at: datetime) -> bool:
        """Overridden by the pause mixin: whether a READY_PAUSE run ends here."""
        return False

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
            task.log = [f"[INFO] {fmt_utc(at)} - Begin to execute task: {task.name}"]
            task.log += [
                f"[INFO] {fmt_utc(at)} - {task.name}: processed batch {i + 1}" for i in range(sc.log_lines)
            ]
            seconds = 10**7 if sc.kind == "long_running" else sc.task_seconds
            self._schedule(inst, at + timedelta(seconds=seconds), "finish")
        elif inst.phase == "finish" and task is not None:
            self._finish_task(inst, task, at)
        elif inst.phase == "retry" and task is not None:
            task.flag = "NO"
            self._new_task_row(inst, task.index, task.retry_times + 1, at)
            self._schedule(inst, at + timedelta(seconds=1), "dispatch")
        elif inst.phase == "stop":
            for t in inst.tasks:
                if t.flag == "YES" and t.state not in ("SUCCESS", "FAILURE", "KILL"):
                    t.state, t.end_time = "KILL", at
                    t.log.append(f"[INFO] {fmt_utc(at)} - process has been killed")
            self._finish(inst, "STOP", at)

    def _finish_task(self, inst: SimInstance, task: SimTask, at: datetime) -> None:
        sc = inst.definition.scenario
        task.end_time = at
        if self._attempt_fails(inst, task):
            task.state = "FAILURE"
            task.log += [
                f"[ERROR] {fmt_utc(at)} - {task.name} failed: {sc.error}",
                f"[INFO] {fmt_utc(at)} - FINALIZE_SESSION, exit code 1",
            ]
            if task.retry_times < task.max_retry_times:
                # the workflow stays RUNNING_EXECUTION while a retry is pending (§11)
                self._schedule(inst, at + timedelta(minutes=task.retry_interval), "retry")
            else:
                self._finish(inst, "FAILURE", at)
            return
        task.state = "SUCCESS"
        task.log.append(f"[INFO] {fmt_utc(at)} - FINALIZE_SESSION, exit code 0")
        if self.paused_after_task(inst, at):
            return
        if inst.task_index + 1 < len(inst.definition.tasks):
            inst.task_index += 1
            self._new_task_row(inst, inst.task_index, 0, at)
            self._schedule(inst, at + timedelta(seconds=1), "dispatch")
        else:
            self._finish(inst, "SUCCESS", at)

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
        if state != "SUCCESS" or not inst.remaining_dates:
            return  # a failed date keeps the rest of its chain: a rerun that succeeds goes on with it
        # serial backfill: the next date starts only after this one ended SUCCESS
        nxt, rest = inst.remaining_dates[0], inst.remaining_dates[1:]
        inst.remaining_dates = []

        def create(when: datetime) -> None:
            self.create_instance(
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
