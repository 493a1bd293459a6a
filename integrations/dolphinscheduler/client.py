"""DolphinClient: the REST adapter for DolphinScheduler 3.1, 3.2 and 3.3.

Parameters are form-encoded (DS binds
`@RequestParam` and never reads a JSON body); every answer is a `{code,msg,data}` envelope whose
business errors arrive under HTTP 200. Errors are translated here, once, into `DolphinError`:

    DolphinError(code, retryable)
    ├── DolphinAuthError        HTTP 401 (empty body) or 10013 bad credentials
    ├── DefinitionOffline       50004, or 50014/10000 whose message says "online"
    └── StartOutcomeUnknown     a start timed out or got a 5xx: it may have happened; look for the marker

Only connect errors, timeouts and 5xx of idempotent calls are retried (tenacity); a start is never
retried blindly, because a second POST would start a second run.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterator
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import requests
import tenacity

from xihe.agent.errors import DolphinError
from xihe.agent.redact import excerpt
from xihe.integrations.dolphinscheduler.dag import Dag, dag_of
from xihe.integrations.dolphinscheduler.models import (
    MARKER_KEY,
    Definition,
    Instance,
    Page,
    Project,
    StartResult,
    TaskRun,
    format_ds_time,
)
from xihe.integrations.dolphinscheduler.profiles import PROFILES, Profile
from xihe.integrations.dolphinscheduler.states import workflow_state_name

OFFLINE_CODES = frozenset({50004})
OFFLINE_IF_MESSAGE_CODES = frozenset({50014, 10000})


class DolphinAuthError(DolphinError):
    """Authentication failed: missing/expired token or session (HTTP 401) or bad credentials (10013)."""


class DefinitionOffline(DolphinError):
    """The workflow definition (or a sub-workflow) is not ONLINE, so DS refused to start it."""


class StartOutcomeUnknown(DolphinError):
    """A start request failed in a way that may still have started the run; search by marker."""


def is_offline_error(code: int | None, message: str) -> bool:
    """Whether a DS error means "definition not online" across versions."""
    if code in OFFLINE_CODES:
        return True
    return code in OFFLINE_IF_MESSAGE_CODES and "online" in message.lower()


def _default_wait() -> tenacity.wait.wait_base:
    return tenacity.wait_exponential(multiplier=0.5, max=8)


class DolphinClient:
    """Talk to one DolphinScheduler API server with token or login/session auth."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        user: str | None = None,
        password: str | None = None,
        version: str = "auto",
        timeout: float = 10.0,
        retries: int = 3,
        wait: tenacity.wait.wait_base | None = None,
        server_timezone: str = "UTC",
        page_size: int = 100,
        session: requests.Session | None = None,
    ) -> None:
        if not token and not (user and password):
            raise ValueError("DolphinClient needs a token or a user and password")
        if version not in ("auto", *PROFILES):
            raise ValueError(f"unknown DolphinScheduler version {version!r}; use auto, 3.1, 3.2 or 3.3")
        self.base_url = base_url.rstrip("/")
        self._token = token
        self._user, self._password = user, password
        self._session_id: str | None = None
        self._version = version
        self._profile: Profile | None = PROFILES.get(version)
        self.timeout = timeout
        self.retries = retries
        self._wait = wait if wait is not None else _default_wait()
        self.zone = ZoneInfo(server_timezone)
        self.page_size = page_size
        self.http = session or requests.Session()
        self.http.trust_env = False  # DS is an internal service; proxies from the environment only hurt
        self._dags: dict[tuple[int, int], Dag] = {}  # (definition code, version) -> its DAG

    def __repr__(self) -> str:  # never show the token or password
        return f"DolphinClient({self.base_url!r}, version={self._version!r})"

    # ---- transport -------------------------------------------------------------------------------

    def _headers(self) -> dict[str, str]:
        if self._token:
            return {"token": self._token}
        if self._session_id:
            return {"sessionId": self._session_id}
        return {}

    def login(self) -> None:
        """Log in with user/password and keep the session id (session auth only)."""
        if not (self._user and self._password):
            raise DolphinAuthError("no DolphinScheduler user configured for session login")
        data = self._call(
            "POST", "/login", {"userName": self._user, "userPassword": self._password}, authed=False
        )
        session_id = (data or {}).get("sessionId") if isinstance(data, dict) else None
        if not session_id:
            raise DolphinAuthError("DolphinScheduler login returned no sessionId")
        self._session_id = str(session_id)

    def _send_once(
        self, method: str, path: str, params: dict[str, Any], idempotent: bool
    ) -> requests.Response:
        url = self.base_url + path
        try:
            if method == "GET":
                return self.http.get(url, params=params, headers=self._headers(), timeout=self.timeout)
            return self.http.post(url, data=params, headers=self._headers(), timeout=self.timeout)
        except requests.ConnectTimeout as exc:
            raise DolphinError(f"{method} {path}: connect timeout", retryable=True) from exc
        except requests.Timeout as exc:
            if not idempotent:
                raise StartOutcomeUnknown(f"{method} {path}: timed out after {self.timeout}s") from exc
            raise DolphinError(f"{method} {path}: timed out after {self.timeout}s", retryable=True) from exc
        except requests.ConnectionError as exc:
            # a refused/reset connection: for a POST the server may have read it, so stay careful
            if not idempotent:
                raise StartOutcomeUnknown(f"{method} {path}: connection failed") from exc
            raise DolphinError(f"{method} {path}: connection failed", retryable=True) from exc

    def _call(
        self,
        method: str,
        path: str,
        params: dict[str, Any] | None = None,
        *,
        idempotent: bool = True,
        authed: bool = True,
    ) -> Any:
        """One logical call: retries per policy, re-login once on 401 in session mode, envelope check."""
        params = {k: v for k, v in (params or {}).items() if v is not None}
        if authed and not self._token and not self._session_id:
            self.login()
        relogged = False

        def attempt() -> Any:
            nonlocal relogged
            resp = self._send_once(method, path, params, idempotent)
            if resp.status_code == 401 and authed and not self._token and not relogged:
                relogged = True  # the session expired or was evicted by another login: once more
                self._session_id = None
                self.login()
                resp = self._send_once(method, path, params, idempotent)
            return self._unwrap(method, path, resp, idempotent)

        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(lambda e: isinstance(e, DolphinError) and e.retryable),
            stop=tenacity.stop_after_attempt(self.retries + 1),
            wait=self._wait,
            reraise=True,
        )
        return retrying(attempt)

    def _unwrap(self, method: str, path: str, resp: requests.Response, idempotent: bool) -> Any:
        status = resp.status_code
        if status == 401:  # empty body by contract: never parse it
            raise DolphinAuthError(
                f"{method} {path}: HTTP 401 (token or session missing, expired or user disabled)"
            )
        if status >= 500:
            if not idempotent:
                raise StartOutcomeUnknown(f"{method} {path}: HTTP {status}")
            raise DolphinError(f"{method} {path}: HTTP {status}", retryable=True)
        if status not in (200, 201):
            raise DolphinError(f"{method} {path}: HTTP {status}")
        try:
            body = resp.json()
        except ValueError:
            raise DolphinError(f"{method} {path}: answer is not JSON") from None
        if not isinstance(body, dict) or "code" not in body:
            raise DolphinError(f"{method} {path}: answer is not a DS envelope")
        code = int(body["code"])
        if code != 0:
            msg = excerpt(str(body.get("msg") or ""), self._token, self._password, limit=1000)
            text = f"{method} {path}: DS error {code}: {msg}"
            if code == 10013:
                raise DolphinAuthError(text, code=code)
            if is_offline_error(code, msg):
                raise DefinitionOffline(text, code=code)
            raise DolphinError(text, code=code)
        return body.get("data")

    # ---- version --------------------------------------------------------------------------------

    @property
    def profile(self) -> Profile:
        """The API profile in use; probed once when configured as `auto`."""
        if self._profile is None:
            self._profile = PROFILES[self.probe_version()]
        return self._profile

    def probe_version(self) -> str:
        """Ask the server once: a 404 on `workflow-definition/simple-list` means pre-3.3.

        Pre-3.3 servers are driven with the 3.2 profile; the start answer (null or trigger code)
        then tells 3.1 from 3.2 where it matters.
        """
        path = "/projects/0/workflow-definition/simple-list"
        if not self._token and not self._session_id:
            self.login()

        def attempt() -> int:
            resp = self._send_once("GET", path, {}, True)
            if resp.status_code == 401 and not self._token:
                self._session_id = None
                self.login()
                resp = self._send_once("GET", path, {}, True)
            if resp.status_code == 401:
                raise DolphinAuthError(f"GET {path}: HTTP 401")
            if resp.status_code >= 500:
                raise DolphinError(f"GET {path}: HTTP {resp.status_code}", retryable=True)
            return resp.status_code

        status = tenacity.Retrying(
            retry=tenacity.retry_if_exception(lambda e: isinstance(e, DolphinError) and e.retryable),
            stop=tenacity.stop_after_attempt(self.retries + 1),
            wait=self._wait,
            reraise=True,
        )(attempt)
        return "3.2" if status == 404 else "3.3"

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

    def _pages(
        self, path: str, params: dict[str, Any], max_pages: int = 1000
    ) -> Iterator[list[dict[str, Any]]]:
        page = 1
        while page <= max_pages:
            data = self._call("GET", path, {**params, "pageNo": page, "pageSize": self.page_size}) or {}
            items = data.get("totalList") or []
            yield items
            if page >= int(data.get("totalPage") or 0) or not items:
                return
            page += 1

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
        """The last `lines` lines of a task's log, paging `/log/detail` until an empty message."""
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
                tail.append(line)
            skip += max(int(data.get("lineNum") or 0), 1)
        while tail and not tail[-1]:
            tail.pop()
        return list(tail)

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
