"""DolphinClient: the REST endpoints xihe uses on DolphinScheduler 3.1, 3.2 and 3.3.

Projects and definitions, starting a run and finding its instances, tasks and logs, and instance
actions. Each is one call through the transport (transport.py: auth, retries, envelope and error
mapping, version profile), shaped into the typed rows of models.py.
"""

from __future__ import annotations

import json
from collections import deque
from datetime import datetime
from typing import Any

from xihe.agent.errors import DolphinError
from xihe.integrations.dolphinscheduler.dag import dag_of, downstream_of, output_readers
from xihe.integrations.dolphinscheduler.logtimes import label_log_line
from xihe.integrations.dolphinscheduler.models import (
    MARKER_KEY,
    CronSchedule,
    Definition,
    Instance,
    LogPage,
    Page,
    Project,
    StartResult,
    TaskRun,
    format_ds_time,
)
from xihe.integrations.dolphinscheduler.states import workflow_state_name
from xihe.integrations.dolphinscheduler.transport import DolphinTransport


class DolphinClient(DolphinTransport):
    """Talk to one DolphinScheduler API server with token or login/session auth."""

    # ---- projects and definitions -----------------------------------------------------------------

    def list_projects(self) -> list[Project]:
        """All projects the user may see."""
        data = self._call("GET", "/projects/list") or []
        return [Project(int(p["code"]), str(p["name"])) for p in data]

    def project_code(self, name: str) -> int:
        """Code of the project called exactly `name`; DolphinError(10018) when there is none."""
        for project in self.list_projects():
            if project.name == name:
                return project.code
        raise DolphinError(f"project {name} not found", code=10018)

    def list_definitions(self, project_code: int) -> list[Definition]:
        """Every workflow definition of a project with its code and release state (all pages)."""
        path = f"/projects/{project_code}/{self.profile.definitions}"
        out: list[Definition] = []
        for items in self._pages(path, {}):
            for d in items:
                out.append(
                    Definition(
                        project_code,
                        int(d["code"]),
                        str(d["name"]),
                        str(d.get("releaseState") or ""),
                        int(d.get("version") or 0),
                    )
                )
        return out

    def task_total(self, project_code: int, inst: Instance) -> int:
        """How many tasks the workflow version `inst` runs has (0 if DS lists none); cached per code+version.

        Read from the definition's DagData; a run of an older version reads the DAG of its own
        version from the instance detail instead.
        """
        code, version = key = (inst.definition_code, inst.definition_version)
        if key not in self._dags:
            profile = self.profile
            newest = max((v for c, v in self._dags if c == code), default=0)
            if not version or version > newest:
                path = f"/projects/{project_code}/{profile.definitions}/{code}"
                dag = dag_of(self._call("GET", path) or {}, profile.dag_keys)
                self._dags[(code, dag.version)] = dag
                if not version or dag.version == version:
                    self._dags[key] = dag
            if key not in self._dags:  # an older version than the definition's current one
                detail = self._call("GET", f"/projects/{project_code}/{profile.instances}/{inst.id}") or {}
                self._dags[key] = dag_of(detail.get("dagData") or {}, profile.dag_keys)
        return len(self._dags[key].task_codes)

    # ---- start and find ---------------------------------------------------------------------------

    def start(
        self,
        project_code: int,
        definition_code: int,
        *,
        marker: str,
        schedule_time: str | None = None,
        failure_strategy: str = "END",
        warning_type: str = "NONE",
        worker_group: str = "default",
        tenant_code: str = "default",
        environment_code: int = -1,
        extra_params: dict[str, str] | None = None,
    ) -> StartResult:
        """Start a run (START_PROCESS) or a serial ascending backfill (COMPLEMENT_DATA when `schedule_time`).

        `schedule_time` is DS's JSON (see schedule.schedule_time_param). `marker` lands in
        `startParams` under `xihe_run` so the instance can be found again.
        """
        profile = self.profile
        start_params = {**(extra_params or {}), MARKER_KEY: marker}
        params: dict[str, Any] = {
            profile.start_code_param: definition_code,
            "execType": "COMPLEMENT_DATA" if schedule_time else "START_PROCESS",
            "scheduleTime": schedule_time or "",
            "failureStrategy": failure_strategy,
            "warningType": warning_type,
            profile.priority_param: "MEDIUM",
            "runMode": "RUN_MODE_SERIAL",
            "expectedParallelismNumber": 2,  # 3.3 unboxes it; <=0 is 50080 in 3.2
            "taskDependType": "TASK_POST",
            "complementDependentMode": "OFF_MODE",
            "startParams": json.dumps(start_params, ensure_ascii=False, separators=(",", ":")),
            "workerGroup": worker_group,
            "tenantCode": tenant_code,
            "environmentCode": environment_code,
            "dryRun": 0,
        }
        if profile.has_execution_order:
            params["executionOrder"] = "ASC_ORDER"  # 3.2 defaults to newest-first
        if profile.sends_timeout:
            params["timeout"] = 86400
        data = self._call(
            "POST", f"/projects/{project_code}/executors/{profile.start_path}", params, idempotent=False
        )
        if isinstance(data, list):
            return StartResult(instance_ids=tuple(int(i) for i in data))
        if isinstance(data, int | str) and str(data).lstrip("-").isdigit():
            return StartResult(trigger_code=int(data))
        return StartResult()

    def instances_by_trigger(self, project_code: int, trigger_code: int) -> list[Instance]:
        """3.2: instances created from a start's trigger code (empty until the master consumes it)."""
        profile = self.profile
        data = (
            self._call(
                "GET", f"/projects/{project_code}/{profile.instances}/trigger", {"triggerCode": trigger_code}
            )
            or []
        )
        return [Instance.from_json(r, profile, self.zone) for r in data]

    def list_instances(
        self,
        project_code: int,
        *,
        definition_code: int | None = None,
        state: str | None = None,
        start_from: datetime | None = None,
        start_to: datetime | None = None,
        host: str | None = None,
        search: str | None = None,
        page_no: int = 1,
        page_size: int | None = None,
    ) -> Page[Instance]:
        """One page of a project's top-level instances, newest start first, filtered server-side."""
        profile = self.profile
        params: dict[str, Any] = {
            "pageNo": page_no,
            "pageSize": page_size or self.page_size,
            profile.list_definition_filter: definition_code,
            "stateType": state,
            "startDate": format_ds_time(start_from, self.zone) if start_from else None,
            "endDate": format_ds_time(start_to, self.zone) if start_to else None,
            "host": host,
            "searchVal": search,
        }
        data = self._call("GET", f"/projects/{project_code}/{profile.instances}", params) or {}
        return Page(
            [Instance.from_json(r, profile, self.zone) for r in data.get("totalList") or []],
            int(data.get("total") or 0),
            int(data.get("totalPage") or 0),
            int(data.get("currentPage") or page_no),
        )

    def get_instance(self, project_code: int, instance_id: int) -> Instance:
        """One instance with its detail (commandParam and globalParams); 50001 when unknown."""
        profile = self.profile
        data = self._call("GET", f"/projects/{project_code}/{profile.instances}/{instance_id}")
        return Instance.from_json(data, profile, self.zone)

    # ---- tasks and logs ---------------------------------------------------------------------------

    def current_tasks(self, project_code: int, instance_id: int) -> tuple[str, list[TaskRun]]:
        """The workflow state and the current attempt of each task (no superseded retries)."""
        profile = self.profile
        data = self._call("GET", f"/projects/{project_code}/{profile.instances}/{instance_id}/tasks") or {}
        state = workflow_state_name(data.get(profile.tasks_state_key))
        return state, [TaskRun.from_json(t, profile, self.zone) for t in data.get("taskList") or []]

    def task_runs(
        self,
        project_code: int,
        *,
        instance_id: int | None = None,
        host: str | None = None,
        state: str | None = None,
        start_from: datetime | None = None,
        start_to: datetime | None = None,
        max_pages: int = 50,
    ) -> list[TaskRun]:
        """Task instance rows including retry history (flag NO), all pages, filtered server-side."""
        profile = self.profile
        params: dict[str, Any] = {
            profile.instance_id_param: instance_id,
            "host": host,
            "stateType": state,
            "startDate": format_ds_time(start_from, self.zone) if start_from else None,
            "endDate": format_ds_time(start_to, self.zone) if start_to else None,
        }
        out: list[TaskRun] = []
        for items in self._pages(f"/projects/{project_code}/task-instances", params, max_pages):
            out.extend(TaskRun.from_json(t, profile, self.zone) for t in items)
        return out

    def log_tail(
        self, task_instance_id: int, lines: int = 100, page_lines: int = 1000, max_pages: int = 10_000
    ) -> list[str]:
        """The last `lines` lines of a task's log, paging `/log/detail` until an empty message.

        Each line's own timestamp is labelled with the server's zone (`logtimes.label_log_line`).
        """
        tail: deque[str] = deque(maxlen=lines)
        skip = 0
        for _ in range(max_pages):
            data = (
                self._call(
                    "GET",
                    "/log/detail",
                    {"taskInstanceId": task_instance_id, "skipLineNum": skip, "limit": page_lines},
                )
                or {}
            )
            message = str(data.get("message") or "")
            if not message:
                break
            for line in message.replace("\r\n", "\n").split("\n"):
                if skip == 0 and line.startswith("[LOG-PATH]"):
                    continue  # the header the worker adds on the first page
                tail.append(label_log_line(line, self.zone))
            skip += max(int(data.get("lineNum") or 0), 1)
        while tail and not tail[-1]:
            tail.pop()
        return list(tail)

    def log_page(self, task_instance_id: int, skip: int, limit: int) -> LogPage:
        """`limit` lines of a task's log after the first `skip` (one `/log/detail` call).

        The first page's `[LOG-PATH]` header is dropped; past the end the page is empty.
        """
        data = (
            self._call(
                "GET",
                "/log/detail",
                {"taskInstanceId": task_instance_id, "skipLineNum": skip, "limit": limit},
            )
            or {}
        )
        message = str(data.get("message") or "")
        if not message:
            return LogPage(skip, ())
        lines = message.replace("\r\n", "\n").split("\n")
        if skip == 0 and lines and lines[0].startswith("[LOG-PATH]"):
            lines = lines[1:]
        return LogPage(skip, tuple(label_log_line(line, self.zone) for line in lines))

    def downstream(
        self, project_code: int, inst: Instance, task_code: int
    ) -> tuple[list[str], dict[str, tuple[str, ...]]]:
        """Names of the tasks that depend on `task_code` in `inst`'s workflow (directly or not), and
        those of them that read its output parameters (`${prop}` of its OUT localParams)."""
        path = f"/projects/{project_code}/{self.profile.definitions}/{inst.definition_code}"
        data = self._call("GET", path) or {}
        names = downstream_of(data, self.profile.dag_keys, task_code)
        readers = {n: used for n, used in output_readers(data, task_code).items() if n in names}
        return names, readers

    # ---- schedules --------------------------------------------------------------------------------

    def schedules(self, project_code: int, definition_code: int) -> list[CronSchedule]:
        """The schedule(s) of one definition (DS keeps at most one); 50003 for an unknown definition."""
        params = {self.profile.instance_definition_field: definition_code}
        out: list[CronSchedule] = []
        for items in self._pages(f"/projects/{project_code}/schedules", params):
            out.extend(CronSchedule.from_json(r, self.profile) for r in items)
        return out

    def schedule_preview(self, project_code: int, schedule: CronSchedule) -> list[str]:
        """The next five fire times DS computes for a schedule (`yyyy-MM-dd HH:mm:ss` in its zone)."""
        spec = {
            "startTime": schedule.start_time,
            "endTime": schedule.end_time,
            "crontab": schedule.crontab,
            "timezoneId": schedule.timezone,
        }
        data = self._call(
            "POST", f"/projects/{project_code}/schedules/preview", {"schedule": json.dumps(spec)}
        )
        return [str(t) for t in data or []]

    def set_schedule_online(self, project_code: int, schedule_id: int, online: bool) -> None:
        """Release a schedule (ONLINE: DS fires it) or take it offline; 10126 when it already is."""
        verb = "online" if online else "offline"
        self._call("POST", f"/projects/{project_code}/schedules/{schedule_id}/{verb}", {}, idempotent=False)

    # ---- actions ----------------------------------------------------------------------------------

    def execute(self, project_code: int, instance_id: int, execute_type: str) -> None:
        """Run an instance action (START_FAILURE_TASK_PROCESS, STOP, PAUSE, ...); asynchronous in DS."""
        profile = self.profile
        self._call(
            "POST",
            f"/projects/{project_code}/executors/execute",
            {profile.instance_id_param: instance_id, "executeType": execute_type},
            idempotent=False,
        )

    def rerun_failed(self, project_code: int, instance_id: int) -> None:
        """Rerun a FAILURE instance from its failed tasks (same instance id, runTimes+1)."""
        self.execute(project_code, instance_id, "START_FAILURE_TASK_PROCESS")

    def stop(self, project_code: int, instance_id: int) -> None:
        """Ask DS to stop a running instance (READY_STOP, then STOP)."""
        self.execute(project_code, instance_id, "STOP")

    def force_success(self, project_code: int, task_instance_id: int) -> None:
        """Mark a failed (or killed) task instance FORCED_SUCCESS (10166 for any other state)."""
        path = f"/projects/{project_code}/task-instances/{task_instance_id}/force-success"
        self._call("POST", path, {}, idempotent=False)
