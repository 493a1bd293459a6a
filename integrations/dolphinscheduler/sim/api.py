"""DolphinSimulator: the simulated master (`model.py`) behind a loopback DolphinScheduler HTTP API.

Follows DolphinScheduler's REST API as it behaves on the wire (3.1-3.3): form
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
import re
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import unquote

from xihe.agent.clock import FakeClock
from xihe.integrations.dolphinscheduler.sim.executors import DS_TIME, Executors, Reply, thousands
from xihe.integrations.dolphinscheduler.sim.logs import Logs
from xihe.integrations.dolphinscheduler.sim.model import DolphinModel, SimProject
from xihe.integrations.dolphinscheduler.sim.schedules import ScheduleReply, Schedules, SimSchedule
from xihe.integrations.dolphinscheduler.sim.views import NAMES, Views, workflow_state_text
from xihe.integrations.fakes.loopback import LoopbackServer, Request, Response


@dataclass
class Fault:
    """An injected transport fault for requests whose path contains `path_contains`."""

    path_contains: str
    status: int = 500
    delay: float = 0.0
    times: int = 1


class DolphinSimulator(Executors, Logs, Schedules, Views, DolphinModel):
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
        first_ids: tuple[int, int] = (101, 5001),
    ) -> None:
        if version not in NAMES:
            raise ValueError(f"unknown version {version!r}")
        DolphinModel.__init__(self, projects, clock=clock, command_delay=command_delay, first_ids=first_ids)
        self.version = version
        self.names = NAMES[version]
        self.token = token
        self.tokens: dict[str, datetime] = {token: self.clock() + timedelta(seconds=token_ttl_seconds)}
        self.users = dict(users or {"admin": "dolphinscheduler123"})
        self.sessions: dict[str, tuple[str, datetime]] = {}  # user -> (session id, login time)
        self.session_ttl = session_ttl
        self.master_host = master_host
        self.starts: list[dict[str, str]] = []  # form of every accepted start request
        self.writes: list[tuple[str, str]] = []  # (path, token) of every authenticated POST, in order
        self.counts: Counter[str] = Counter()
        self.faults: list[Fault] = []
        self._triggers = itertools.count(11964055605440)
        self.schedules: dict[int, SimSchedule] = {}
        self._schedule_ids = itertools.count(1)
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
                if req.method == "POST":
                    self.writes.append((path, req.headers.get("token") or "session"))
                data = self._route(req.method, path, req.form())
                created = path == "/access-tokens" or path.endswith("/schedules/preview")
                status = 201 if created and req.method == "POST" else 200
                return self._envelope(data, delay, status)
            except Reply as r:
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
            raise Reply(10004, "user name is null")
        if self.users.get(user) != password:
            raise Reply(10013, "user name or password error")
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
            raise Reply(0, "", status=404)
        rest = m.group(2) or ""
        if (
            not rest.startswith(("/process-", "/workflow-", "/executors", "/task-instances", "/schedules"))
            and rest
        ):
            raise Reply(0, "", status=404)
        for prefix in ("/process-", "/workflow-"):
            if (
                rest.startswith(prefix)
                and not rest.startswith(f"/{n['defs']}")
                and not rest.startswith(f"/{n['insts']}")
            ):
                raise Reply(0, "", status=404)  # the other profile's paths do not exist here
        project = self.projects.get(int(m.group(1)))
        if project is None:
            raise Reply(10190, "This project was not found. Please refresh page.")
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
        if rest.startswith("/schedules"):
            return self._schedules(method, project, rest[len("/schedules") :], form)
        forced = re.fullmatch(r"/task-instances/(\d+)/force-success", rest)
        if forced and method == "POST":
            return self._force_success(project, int(forced.group(1)))
        raise Reply(0, "", status=404)

    def _schedules(self, method: str, p: SimProject, rest: str, form: dict[str, str]) -> Any:
        try:
            found = self.schedule_route(method, p, rest, form)
        except ScheduleReply as r:
            raise Reply(r.code, r.msg) from None
        except KeyError:
            raise Reply(0, "", status=404) from None
        if method == "GET":
            return self._page(found, form, self.schedule_json)
        return found

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
            raise Reply(10001, "request parameter pageNo is not valid") from None
        if page_no <= 0 or page_size <= 0:
            raise Reply(10001, f"request parameter {'pageNo' if page_no <= 0 else 'pageSize'} is not valid")
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
            raise Reply(10001, f"request parameter {key} is not valid") from None

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
            raise Reply(50003, f"process definition {form.get('name')} does not exist")
        m = re.fullmatch(r"/(\d+)(/release)?", rest)
        if m:
            hit = next((x for x in p.definitions if x.code == int(m.group(1))), None)
            if hit is None:
                raise Reply(50003, f"process definition {thousands(int(m.group(1)))} does not exist")
            if m.group(2) and method == "POST":
                hit.online = form.get("releaseState") == "ONLINE"
                return True
            if method == "GET":
                return self.dag_json(p, hit, hit.version, hit.tasks)
        raise Reply(0, "", status=404)

    # ---- instances -----------------------------------------------------------------------------

    def _instances(self, method: str, p: SimProject, rest: str, form: dict[str, str]) -> Any:
        n = self.names
        if method != "GET":
            raise Reply(0, "", status=405)
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
            raise Reply(10001, "request parameter id is not valid")
        inst = self.instances.get(int(m.group(1)))
        label = "workflow" if self.version == "3.3" else "process"
        if inst is None:
            raise Reply(50001, f"{label} instance {thousands(int(m.group(1)))} does not exist")
        if inst.project is not p:
            raise Reply(50003, f"{label} definition {inst.definition.code} does not exist")
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
