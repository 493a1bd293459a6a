"""DolphinSimulator: the simulated master (`model.py`) behind a loopback DolphinScheduler HTTP API.

Follows /work/shared/reference/dolphinscheduler-api.md §14 (and the §15 corrections): form
parameters, the `{code,msg,data}` envelope with business errors under HTTP 200, 401 with an empty
body, the per-version paths, parameters, start answers and error codes, log paging with a header
on the first page and `lineNum=1` past EOF. Faults (5xx, slow answers, dropped requests) are
queued with `fail()` / `slow()` / `drop()`.

    sim = DolphinSimulator([SimProject("etl", 1000000000001, [SimDefinition("order_sync", 2000000000001)])])
    with sim:
        client = DolphinClient(sim.url, token=sim.token)
"""

from __future__ import annotations

import itertools
import json
import re
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import unquote

from agent.clock import FakeClock
from integrations.fakes.dolphin.model import WF_FINAL, DolphinModel, SimInstance, SimProject
from integrations.fakes.dolphin.views import NAMES, WF_CODES, Views, workflow_state_text
from integrations.fakes.loopback import LoopbackServer, Request, Response

DS_TIME = "%Y-%m-%d %H:%M:%S"
_ACTIONS = {
    "START_FAILURE_TASK_PROCESS": frozenset({"FAILURE"}),
    "STOP": frozenset({"RUNNING_EXECUTION", "READY_PAUSE"}),
    "REPEAT_RUNNING": WF_FINAL,
}


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


def _thousands(n: int) -> str:
    return f"{n:,}"  # MessageFormat puts separators in numbers


class DolphinSimulator(Views, DolphinModel):
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
        if version not in NAMES:
            raise ValueError(f"unknown version {version!r}")
        DolphinModel.__init__(self, projects, clock=clock, command_delay=command_delay)
        self.version = version
        self.names = NAMES[version]
        self.token = token
        self.tokens: dict[str, datetime] = {token: self.clock() + timedelta(seconds=token_ttl_seconds)}
        self.users = dict(users or {"admin": "dolphinscheduler123"})
        self.sessions: dict[str, tuple[str, datetime]] = {}  # user -> (session id, login time)
        self.session_ttl = session_ttl
        self.master_host = master_host
        self.starts: list[dict[str, str]] = []  # form of every accepted start request
        self.counts: Counter[str] = Counter()
        self.faults: list[Fault] = []
        self._triggers = itertools.count(11964055605440)
        self._sessions_made = itertools.count(1)
        self.server = LoopbackServer(self._handle)

    # ---- lifecycle and faults -------------------------------------------------------------------

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

    def fail(self, path_contains: str, status: int = 500, times: int = 1) -> None:
        """Answer the next `times` matching requests with HTTP `status` (after doing nothing)."""
        self.faults.append(Fault(path_contains, status=status, times=times))

    def slow(self, path_contains: str, seconds: float, times: int = 1) -> None:
        """Process the next `times` matching requests normally but answer after `seconds` of real time."""
        self.faults.append(Fault(path_contains, status=0, delay=seconds, times=times))

    def drop(self, path_contains: str, seconds: float, times: int = 1) -> None:
        """Do nothing with the next matching requests, hold them `seconds` of real time, then answer 502.

        From DolphinScheduler's side this is a request that never arrived (a bot killed meanwhile
        has recorded that it was about to send it).
        """
        self.faults.append(Fault(path_contains, status=502, delay=seconds, times=times))

    def expire_token(self, token: str | None = None) -> None:
        """Make a token expire now (the next request with it gets 401)."""
        self.tokens[token or self.token] = self.clock() - timedelta(seconds=1)

    def expire_sessions(self) -> None:
        """Drop every login session (as after the session timeout)."""
        self.sessions.clear()

    def reset_counts(self) -> None:
        """Forget the request counters."""
        self.counts.clear()

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
                        page = b"<html><body>502 Bad Gateway</body></html>"
                        return Response(fault.status, page, {"Content-Type": "text/html"}, delay=fault.delay)
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
            return [self.project_json(p) for p in self.projects.values()]
        if method == "GET" and path == "/projects":
            return self._page(
                sorted(self.projects.values(), key=lambda p: -p.code),
                form,
                self.project_json,
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
            return self.project_json(project)
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

    def _page(
        self,
        rows: list[Any],
        form: dict[str, str],
        render: Any,
        search: Any = None,
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

    @staticmethod
    def _parse_time(value: str | None, key: str) -> datetime | None:
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
                lambda d: self.definition_json(p, d),
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
                    return self.dag_json(p, d, d.version, d.tasks)
            raise _Reply(50003, f"process definition {form.get('name')} does not exist")
        m = re.fullmatch(r"/(\d+)(/release)?", rest)
        if m:
            hit = next((x for x in p.definitions if x.code == int(m.group(1))), None)
            if hit is None:
                raise _Reply(50003, f"process definition {_thousands(int(m.group(1)))} does not exist")
            if m.group(2) and method == "POST":
                hit.online = form.get("releaseState") == "ONLINE"
                return True
            if method == "GET":
                return self.dag_json(p, hit, hit.version, hit.tasks)
        raise _Reply(0, "", status=404)

    # ---- instances -----------------------------------------------------------------------------

    def _instances(self, method: str, p: SimProject, rest: str, form: dict[str, str]) -> Any:
        n = self.names
        if method != "GET":
            raise _Reply(0, "", status=405)
        if rest == "":
            return self._instance_list(p, form)
        if rest == "/trigger" and self.version == "3.2":
            code = int(form.get("triggerCode") or 0)
            return [
                self.instance_json(i, view="trigger")
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
            return self.instance_json(inst, view="detail")
        current = [t for t in inst.tasks if t.flag == "YES"]
        current.sort(key=lambda t: (t.start_time or datetime.max.replace(tzinfo=UTC), t.id), reverse=True)
        return {
            n["tasks_state"]: workflow_state_text(self.version, inst.state),
            "taskList": [self.task_json(t, with_duration=False) for t in current],
        }

    def _instance_list(self, p: SimProject, form: dict[str, str]) -> Any:
        rows = [i for i in self.instances.values() if i.project is p]
        code = int(form.get(self.names["list_def"]) or 0)
        if code:
            rows = [i for i in rows if i.definition.code == code]
        if form.get("stateType"):
            rows = [i for i in rows if i.state == form["stateType"]]
        if form.get("host"):
            rows = [i for i in rows if form["host"] in self.master_host]  # master host, not worker (§15.2)
        start = self._parse_time(form.get("startDate"), "startDate")
        end = self._parse_time(form.get("endDate"), "endDate")
        rows = [
            i
            for i in rows
            if (start is None or i.start_time >= start) and (end is None or i.start_time <= end)
        ]
        rows.sort(
            key=lambda i: (i.start_time, i.end_time or datetime.max.replace(tzinfo=UTC), i.id), reverse=True
        )
        return self._page(
            rows,
            form,
            lambda i: self.instance_json(i, view="list"),
            search=lambda i, s: s in i.definition.name,
        )

    def _task_instances(self, p: SimProject, form: dict[str, str]) -> Any:
        rows = [t for t in self.tasks.values() if self.instances[t.instance_id].project is p]
        inst_id = int(form.get(self.names["inst_param"]) or 0)
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
            rows, form, lambda t: self.task_json(t, with_duration=True), search=lambda t, s: s in t.name
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
        try:
            inst_id = int(form.get(self.names["inst_param"]) or "")
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
        allowed = _ACTIONS.get(action)
        if allowed is None:
            raise _Reply(10001, "request parameter executeType is not valid")
        if action == "STOP" and self.version == "3.3":
            allowed = allowed | {"READY_STOP", "SERIAL_WAIT", "WAIT_TO_RUN"}
        if inst.state not in allowed:
            raise self._state_error(inst, action)
        if action == "STOP":
            self.stop_instance(inst)
        elif action == "START_FAILURE_TASK_PROCESS":
            self.rerun_failed(inst)
        else:
            self.repeat_running(inst)
        return None

    def _state_error(self, inst: SimInstance, action: str) -> _Reply:
        if self.version == "3.1":
            code, desc = WF_CODES[inst.state]
            return _Reply(
                50006,
                f"the status of process instance {inst.id} is "
                f"WorkflowExecutionStatus{{code={code}, desc='{desc}'}},Cannot perform {action} operation",
            )
        if self.version == "3.2":
            return _Reply(50015, "execute process instance error")
        return _Reply(
            10000, f"Internal Server Error: The workflow instance state is {inst.state}, cannot {action}"
        )

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
