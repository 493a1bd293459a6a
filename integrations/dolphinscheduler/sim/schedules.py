"""Schedules (cron timings) in the simulated API: list, online/offline and preview (a mixin).

As SchedulerController / SchedulerServiceImpl answer them (integrations/dolphinscheduler/CONTRACT.md):
- `GET /projects/{pc}/schedules?processDefinitionCode=` (3.3: `workflowDefinitionCode`) with
  `pageNo`/`pageSize`: a PageInfo of schedules; an unknown definition is 50003;
- `POST /projects/{pc}/schedules/{id}/online|offline`: `data` null; an unknown id is 10022, the
  state it already has is 10126 ("schedule release is already ONLINE"), online while the definition
  is offline is 50004;
- `POST /projects/{pc}/schedules/preview` with `schedule` JSON (`crontab`, `timezoneId`, `startTime`,
  `endTime`): HTTP 201 and the next five fire times as `yyyy-MM-dd HH:mm:ss` in that zone, counted
  from the later of now and `startTime` and none after `endTime` (`previewSchedule`); the start and
  end are read in the server's JSON zone (UTC), as the schedule list wrote them.
The cron is Quartz's (seconds first, `?` for "no value"); the simulator evaluates it with
APScheduler, which covers the forms used here (no `L`, `W` or `#`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from apscheduler.triggers.cron import CronTrigger

from xihe.integrations.dolphinscheduler.sim.model import DolphinModel, SimProject

DS_TIME = "%Y-%m-%d %H:%M:%S"


class ScheduleReply(Exception):
    """Internal: a business error (HTTP 200) for the API to put in its envelope."""

    def __init__(self, code: int, msg: str) -> None:
        super().__init__(msg)
        self.code, self.msg = code, msg


@dataclass
class SimSchedule:
    """One definition's schedule."""

    id: int
    project: SimProject
    definition_code: int
    crontab: str
    timezone_id: str
    online: bool
    start_time: str = "2026-01-01 00:00:00"
    end_time: str = "2126-01-01 00:00:00"


def fire_times(
    crontab: str, zone: str, after: datetime, count: int = 5, until: datetime | None = None
) -> list[str]:
    """The next `count` fire times of a Quartz cron strictly after `after` (none later than `until`), in
    `zone`: `CronUtils.getSelfFireDateList`, whose cron-utils `nextExecution` is strictly after."""
    fields = crontab.split()
    second, minute, hour, day, month, weekday = fields[:6]
    year = fields[6] if len(fields) > 6 else "*"
    trigger = CronTrigger(
        second=second,
        minute=minute,
        hour=hour,
        day="*" if day == "?" else day,
        month=month,
        day_of_week="*" if weekday == "?" else weekday,
        year=year,
        timezone=ZoneInfo(zone),
    )
    out: list[str] = []
    previous = None
    now = after.astimezone(ZoneInfo(zone)) + timedelta(microseconds=1)  # strictly after, as nextExecution
    for _ in range(count):
        nxt = trigger.get_next_fire_time(previous, now)
        if nxt is None or (until is not None and nxt > until):
            break
        out.append(nxt.strftime(DS_TIME))
        previous, now = nxt, nxt
    return out


def _server_time(value: str | None) -> datetime | None:
    """A `yyyy-MM-dd HH:mm:ss` of the API's JSON (the server's zone: UTC in the simulator)."""
    return datetime.strptime(value, DS_TIME).replace(tzinfo=UTC) if value else None


class Schedules(DolphinModel):
    """Schedules of the seeded definitions (needs `version` and `names`)."""

    version: str
    names: dict[str, str]
    schedules: dict[int, SimSchedule]
    _schedule_ids: Iterator[int]

    def add_schedule(
        self, definition: str, crontab: str, zone: str = "Asia/Shanghai", online: bool = True
    ) -> SimSchedule:
        """Give a seeded definition a schedule (DS allows one per definition)."""
        project, d = self.find_definition(definition)
        schedule = SimSchedule(next(self._schedule_ids), project, d.code, crontab, zone, online)
        self.schedules[schedule.id] = schedule
        return schedule

    def schedule_json(self, s: SimSchedule) -> dict[str, Any]:
        n = self.names
        d = next(x for x in s.project.definitions if x.code == s.definition_code)
        label = "workflow" if self.version == "3.3" else "process"
        return {
            "id": s.id,
            n["def_field"]: s.definition_code,
            f"{label}DefinitionName": d.name,
            "projectName": s.project.name,
            "definitionDescription": "",
            "startTime": s.start_time,
            "endTime": s.end_time,
            "timezoneId": s.timezone_id,
            "crontab": s.crontab,
            "failureStrategy": "END",
            "warningType": "NONE",
            "createTime": "2026-01-01 00:00:00",
            "updateTime": "2026-01-01 00:00:00",
            "userId": 1,
            "userName": "admin",
            "releaseState": "ONLINE" if s.online else "OFFLINE",
            "warningGroupId": 0,
            n["priority"]: "MEDIUM",
            "workerGroup": "default",
            "environmentCode": -1,
        }

    def schedule_route(self, method: str, p: SimProject, rest: str, form: dict[str, str]) -> Any:
        """`rest` after `/schedules` (a GET answers the matching rows, for the caller to page); raises
        ScheduleReply for business errors, KeyError for no route."""
        schedules = self.schedules
        if method == "GET" and rest == "":
            code = int(form.get(self.names["def_field"]) or 0)
            if not any(d.code == code for d in p.definitions):
                raise ScheduleReply(50003, f"process definition {code} does not exist")
            return [s for s in schedules.values() if s.project is p and s.definition_code == code]
        if method == "POST" and rest == "/preview":
            data = json.loads(form.get("schedule") or "{}")
            start, end = (_server_time(data.get(k)) for k in ("startTime", "endTime"))
            now = self.clock()
            after = max(now, start) if start else now
            return fire_times(data["crontab"], data.get("timezoneId") or "UTC", after, until=end)
        parts = rest.strip("/").split("/")
        if method == "POST" and len(parts) == 2 and parts[0].isdigit() and parts[1] in ("online", "offline"):
            s = schedules.get(int(parts[0]))
            if s is None or s.project is not p:
                raise ScheduleReply(10022, f"scheduler crontab {parts[0]} does not exist")
            online = parts[1] == "online"
            if s.online == online:
                raise ScheduleReply(10126, f"schedule release is already {'ONLINE' if online else 'OFFLINE'}")
            d = next(x for x in p.definitions if x.code == s.definition_code)
            if online and not d.online:
                raise ScheduleReply(50004, f"process definition {d.name} not online")
            s.online = online
            return None
        raise KeyError(rest)
