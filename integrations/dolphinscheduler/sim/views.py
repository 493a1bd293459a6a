"""JSON as each DolphinScheduler version writes it: names per version, projects, definitions,
instances (list, detail and trigger rows differ), task rows and PageInfo pages."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from xihe.agent.clock import FakeClock
from xihe.integrations.dolphinscheduler.sim.model import (
    SimDefinition,
    SimInstance,
    SimProject,
    SimTask,
    fmt_utc,
)

WF_CODES = {
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

# The names each version uses (kept apart from the client's profiles on purpose: if the client
# got a name wrong, a shared table would hide it).
NAMES: dict[str, dict[str, str]] = {
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
NAMES["3.2"] = dict(NAMES["3.1"])
NAMES["3.3"] = {
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


def fmt_naive(value: datetime | None) -> str | None:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value else None


def duration(start: datetime | None, end: datetime | None, now: datetime) -> str | None:
    """DS's `duration`, e.g. "2h 3m 4s", at least "1s", measured to now while running."""
    if start is None:
        return None
    seconds = max(int(((end or now) - start).total_seconds()), 1)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    parts = [f"{h}h" if h else "", f"{m}m" if m else "", f"{s}s" if s else ""]
    return " ".join(p for p in parts if p) or "1s"


def workflow_state_text(version: str, state: str) -> str:
    """`processInstanceState` of /tasks: the toString form in 3.1/3.2, the name in 3.3."""
    if version == "3.3":
        return state
    code, desc = WF_CODES[state]
    return f"WorkflowExecutionStatus{{code={code}, desc='{desc}'}}"


class Views:
    """JSON renderers; mixed into the simulator (needs version, names, clock, instances, master_host)."""

    version: str
    names: dict[str, str]
    master_host: str
    instances: dict[int, SimInstance]
    clock: FakeClock

    def project_json(self, p: SimProject) -> dict[str, Any]:
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

    def definition_json(self, p: SimProject, d: SimDefinition) -> dict[str, Any]:
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

    def dag_json(
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
                "taskParams": _task_params(d, name),
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
        definition = {**self.definition_json(p, d), "version": version}
        return {n["dag_def"]: definition, n["dag_rel"]: relations, "taskDefinitionList": task_defs}

    def instance_json(self, inst: SimInstance, *, view: str) -> dict[str, Any]:
        """view: list | detail | trigger. 3.1 list rows carry null params; executorName only in lists."""
        n, now = self.names, self.clock()
        props = [
            {"prop": k, "direct": "IN", "type": "VARCHAR", "value": v} for k, v in inst.start_params.items()
        ]
        if self.version == "3.3":
            command_param: dict[str, Any] = {"commandParams": props}
        else:
            command_param = {"StartParams": dict(inst.start_params)}
        if inst.schedule_time is not None:
            command_param["complementScheduleDateList"] = fmt_naive(inst.schedule_time)
        row: dict[str, Any] = {
            "id": inst.id,
            "name": f"{inst.definition.name}-{inst.version}-"
            f"{inst.start_time.astimezone(UTC):%Y%m%d%H%M%S}{inst.start_time.microsecond // 1000:03d}",
            n["def_field"]: inst.definition.code,
            n["def_version"]: inst.version,
            "projectCode": inst.project.code,
            "state": inst.state,
            "recovery": "NO",
            "startTime": fmt_utc(inst.start_time),
            "endTime": fmt_utc(inst.end_time),
            "runTimes": inst.run_times,
            "host": self.master_host,
            "commandType": inst.command_type,
            "commandParam": json.dumps(command_param),
            "taskDependType": "TASK_POST",
            "failureStrategy": "END",
            "warningType": "NONE",
            "warningGroupId": None,
            "scheduleTime": fmt_naive(inst.schedule_time),
            "commandStartTime": fmt_utc(inst.command_start),
            "globalParams": json.dumps(props),
            "executorId": 1,
            "executorName": inst.executor if view == "list" else None,
            "tenantCode": "default",
            n["is_sub"]: "NO",
            "historyCmd": inst.command_type,
            "duration": duration(inst.start_time, inst.end_time, now) if view == "list" else None,
            n["priority"]: "MEDIUM",
            "workerGroup": "default",
            "environmentCode": -1,
            "timeout": 0,
            "dryRun": 0,
            "testFlag": 0,
            "restartTime": fmt_utc(inst.restart_time),
            "stateHistory": "[]",
            "complementData": inst.schedule_time is not None,
            "blocked": False,
        }
        if self.version == "3.1" and view == "list":
            # the 3.1.9 list SQL does not select them, and Jackson writes the unset fields as null (§6, §15.3)
            row["commandParam"] = row["globalParams"] = None
            row["complementData"] = False
        if view == "detail":  # the DAG of the version this run uses
            row["dagData"] = self.dag_json(inst.project, inst.definition, inst.version, inst.dag_tasks)
            row["locations"] = None
        return row

    def task_json(self, t: SimTask, *, with_duration: bool) -> dict[str, Any]:
        n, inst = self.names, self.instances[t.instance_id]
        return {
            "id": t.id,
            "name": t.name,
            "taskType": "SHELL",
            n["task_inst"]: t.instance_id,
            n["task_inst_name"]: self.instance_json(inst, view="trigger")["name"],
            "projectCode": inst.project.code,
            "taskCode": t.code,
            "taskDefinitionVersion": 1,
            "state": t.state,
            "firstSubmitTime": fmt_utc(t.first_submit_time),
            "submitTime": fmt_utc(t.submit_time),
            "startTime": fmt_utc(t.start_time),
            "endTime": fmt_utc(t.end_time),
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
            "duration": duration(t.start_time, t.end_time, self.clock()) if with_duration else None,
        }


def _task_params(d: SimDefinition, task: str) -> dict[str, Any]:
    """A SHELL task's params: its script (using `${prop}` for what it reads) and its OUT parameters
    (`Property`: prop, direct, type, value), which DolphinScheduler hands to the tasks after it."""
    script = " ".join([f"run {task}", *(f"${{{prop}}}" for prop in d.reads.get(task, ()))])
    local = [
        {"prop": prop, "direct": "OUT", "type": "VARCHAR", "value": ""} for prop in d.outputs.get(task, ())
    ]
    return {"rawScript": script, "localParams": local, "resourceList": []}
