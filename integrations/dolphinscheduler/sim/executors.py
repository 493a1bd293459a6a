"""Start and instance actions of the simulated API: parameter checks, per-version errors, backfill dates.

A mixin of `DolphinSimulator`; what the master then does with a command is `model.py`'s.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from xihe.integrations.dolphinscheduler.sim.actions import Actions
from xihe.integrations.dolphinscheduler.sim.model import WF_FINAL, SimInstance, SimProject
from xihe.integrations.dolphinscheduler.sim.views import WF_CODES

DS_TIME = "%Y-%m-%d %H:%M:%S"
_ACTIONS = {
    "START_FAILURE_TASK_PROCESS": frozenset({"FAILURE"}),
    "STOP": frozenset({"RUNNING_EXECUTION", "READY_PAUSE"}),
    "REPEAT_RUNNING": WF_FINAL,
    "PAUSE": frozenset({"RUNNING_EXECUTION"}),
    "RECOVER_SUSPENDED_PROCESS": frozenset({"PAUSE", "STOP"}),
}
_FORCEABLE = frozenset({"FAILURE", "NEED_FAULT_TOLERANCE", "KILL"})  # isFailure() or isKill()


class Reply(Exception):
    """Internal: answer the request with this envelope (business errors are HTTP 200)."""

    def __init__(self, code: int, msg: str, status: int = 200) -> None:
        super().__init__(msg)
        self.code, self.msg, self.status = code, msg, status


def thousands(n: int) -> str:
    return f"{n:,}"  # MessageFormat puts separators in numbers


class Executors(Actions):
    """`executors/start-…-instance`, `executors/execute` and a task's `force-success` (needs version,
    names, starts, _triggers)."""

    version: str
    names: dict[str, str]
    starts: list[dict[str, str]]
    _triggers: Any

    def _start_error(self, code: int, detail: str) -> Reply:
        if self.version == "3.3":
            if code == 50014:
                return Reply(50014, f"start workflow instance error:{detail}")
            return Reply(code, detail)
        return Reply(code, "start process instance error" if code == 50014 else detail)

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
            raise Reply(50080, "task parallelism parameter is not valid")
        found = [(pp, d) for pp in self.projects.values() for d in pp.definitions if d.code == code]
        if not found:
            if self.version == "3.3":
                raise Reply(10000, f"Internal Server Error: workflow definition {code} not found")
            raise self._start_error(50014, "NullPointerException")
        project, d = found[0]
        if project is not p:
            raise Reply(50003, f"process definition {thousands(code)} does not exist")
        if not d.online:
            if self.version == "3.3":
                raise self._start_error(50014, " The workflowDefinition should be online")
            raise Reply(50004, f"process definition {thousands(code)} process version {d.version} not online")
        dates: list[datetime] = []
        if (form.get("execType") or "START_PROCESS") == "COMPLEMENT_DATA":
            dates = self._order(self._complement_dates(form.get("scheduleTime", "")), form)
        try:
            parsed = json.loads(form.get("startParams") or "{}")
            params = {str(k): str(v) for k, v in parsed.items()} if isinstance(parsed, dict) else {}
        except ValueError:
            params = {}  # invalid JSON is silently ignored
        self.starts.append(dict(form))
        trigger = next(self._triggers) if self.version == "3.2" else None
        command_type = "COMPLEMENT_DATA" if dates else "START_PROCESS"
        first, rest = (dates[0], dates[1:]) if dates else (None, [])
        if self.version == "3.3":  # synchronous RPC: the id exists on return
            inst = self.create_instance(p, d, self.clock(), first, rest, params, "admin", None, command_type)
            return [inst.id]

        def consume(at: datetime) -> None:
            self.create_instance(p, d, at, first, rest, params, "admin", trigger, command_type)

        self.consume_later(consume)
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
                    raise Reply(1400003, "The number of complement dates exceed 100.")
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
                raise Reply(10000, "Internal Server Error: cannot parse backfill time") from None
            raise self._start_error(50014, "bad complement json") from None
        if not dates:
            raise Reply(50081, "The range of date for complementing date is not valid")
        return dates

    def _order(self, dates: list[datetime], form: dict[str, str]) -> list[datetime]:
        order = form.get("executionOrder")
        if self.version == "3.1":
            return dates  # always ascending
        if self.version == "3.2":
            return dates if order == "ASC_ORDER" else list(reversed(dates))
        return list(reversed(dates)) if order == "DESC_ORDER" else dates

    def _execute(self, p: SimProject, form: dict[str, str]) -> Any:
        try:
            inst_id = int(form.get(self.names["inst_param"]) or "")
        except ValueError:
            raise Reply(50015, "execute process instance error") from None
        action = form.get("executeType", "")
        inst = self.instances.get(inst_id)
        label = "workflow" if self.version == "3.3" else "process"
        if inst is None:
            raise Reply(50001, f"{label} instance {thousands(inst_id)} does not exist")
        if inst.project is not p:
            if self.version == "3.2":
                raise Reply(50015, "execute process instance error")
            raise Reply(50003, f"{label} definition {inst.definition.code} does not exist")
        allowed = _ACTIONS.get(action)
        if allowed is None:
            raise Reply(10001, "request parameter executeType is not valid")
        if action == "STOP" and self.version == "3.3":
            allowed = allowed | {"READY_STOP", "SERIAL_WAIT", "WAIT_TO_RUN"}
        if inst.state not in allowed:
            raise self._state_error(inst, action)
        if action == "STOP":
            self.stop_instance(inst)
        elif action == "START_FAILURE_TASK_PROCESS":
            self.rerun_failed(inst)
        elif action == "PAUSE":
            self.pause_instance(inst)
        elif action == "RECOVER_SUSPENDED_PROCESS":
            self.recover_instance(inst)
        else:
            self.repeat_running(inst)
        return None

    def _state_error(self, inst: SimInstance, action: str) -> Reply:
        if self.version == "3.1":
            code, desc = WF_CODES[inst.state]
            return Reply(
                50006,
                f"the status of process instance {inst.id} is "
                f"WorkflowExecutionStatus{{code={code}, desc='{desc}'}},Cannot perform {action} operation",
            )
        if self.version == "3.2":
            return Reply(50015, "execute process instance error")
        return Reply(
            10000, f"Internal Server Error: The workflow instance state is {inst.state}, cannot {action}"
        )

    def _force_success(self, p: SimProject, task_id: int) -> Any:
        """`POST /projects/{pc}/task-instances/{id}/force-success` (TaskInstanceServiceImpl.forceTaskSuccess)."""
        task = self.tasks.get(task_id)
        if task is None:
            raise Reply(10008, "task instance not found")
        inst = self.instances[task.instance_id]
        if inst.project is not p:
            if self.version == "3.1":
                raise Reply(10008, "task instance not found")
            raise Reply(10000, f"Internal Server Error: The task instance is not under the project: {p.code}")
        if self.version != "3.1" and inst.state not in WF_FINAL:
            raise Reply(
                10000,
                f"Internal Server Error: The workflow instance is not finished: {inst.state} "
                "cannot force start task instance",
            )
        if task.state not in _FORCEABLE:
            raise Reply(
                10166,
                f"the status of task instance {task_id} is {task.state},Cannot perform force success operation",
            )
        self.force_task_success(inst, task)
        return None
