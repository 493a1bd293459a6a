"""Typed views of DolphinScheduler JSON: projects, definitions, instances, task runs, pages."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from typing import Any, Generic, TypeVar

from xihe.integrations.dolphinscheduler.profiles import Profile
from xihe.integrations.dolphinscheduler.states import workflow_state_name

MARKER_KEY = "xihe_run"  # startParams key carrying "<task>:<step>" of the bot run that started it
REQUESTED_BY_KEY = "xihe_requested_by"  # startParams: who asked xihe for the run (DS keeps it with the run)
DS_TIME = "%Y-%m-%d %H:%M:%S"

T = TypeVar("T")


def parse_ds_time(value: Any, zone: tzinfo) -> datetime | None:
    """Parse `yyyy-MM-dd HH:mm:ss` in the server's zone into an aware datetime."""
    if not value:
        return None
    return datetime.strptime(str(value)[:19], DS_TIME).replace(tzinfo=zone)


def format_ds_time(value: datetime, zone: tzinfo) -> str:
    """Format an aware datetime as DS expects it in request parameters."""
    return value.astimezone(zone).strftime(DS_TIME)


def _params_from_json(text: Any) -> dict[str, str]:
    """Collect prop→value pairs from a commandParam or globalParams JSON string."""
    if not text:
        return {}
    try:
        data = json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return {}
    out: dict[str, str] = {}
    if isinstance(data, list):  # globalParams / 3.3 commandParams: [{"prop":…,"value":…}]
        for item in data:
            if isinstance(item, dict) and "prop" in item:
                out[str(item["prop"])] = str(item.get("value", ""))
    elif isinstance(data, dict):
        start = data.get("StartParams")
        if isinstance(start, str):  # some versions nest it as a JSON string
            start = _params_from_json(start)
        if isinstance(start, dict):
            out.update({str(k): str(v) for k, v in start.items()})
        out.update(_params_from_json(data.get("commandParams")))
    return out


def marker_of(raw: dict[str, Any]) -> str | None:
    """The xihe marker stored in an instance row, or None when the row carries no params to look in.

    3.1 list rows do not select the params; Jackson writes those fields as `null` (or a version may
    leave the keys out). Either way the caller must read the detail; a detail without
    params means "no marker" (see `detail_marker`).
    """
    if raw.get("commandParam") is None and raw.get("globalParams") is None:
        return None
    params = _params_from_json(raw.get("commandParam"))
    params.update({k: v for k, v in _params_from_json(raw.get("globalParams")).items() if k not in params})
    return params.get(MARKER_KEY, "")


def detail_marker(detail: Instance) -> str:
    """The marker of an instance read with `GET …/{id}`: authoritative, so absent params mean none."""
    return detail.marker or ""


@dataclass(frozen=True)
class Project:
    """A DolphinScheduler project."""

    code: int
    name: str


@dataclass(frozen=True)
class Definition:
    """A workflow definition with what the name catalog needs."""

    project_code: int
    code: int
    name: str
    release_state: str
    version: int = 0


@dataclass(frozen=True)
class Instance:
    """A workflow instance (one run) as listed or fetched."""

    id: int
    name: str
    project_code: int
    definition_code: int
    state: str
    command_type: str
    schedule_time: datetime | None
    start_time: datetime | None
    end_time: datetime | None
    run_times: int
    host: str  # the master host
    marker: str | None  # None: not present in this row (3.1 list), "": no marker
    duration: str = ""
    definition_version: int = 0
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_json(cls, raw: dict[str, Any], profile: Profile, zone: tzinfo) -> Instance:
        """Build from an instance JSON object of the given profile."""
        return cls(
            id=int(raw["id"]),
            name=str(raw.get("name") or ""),
            project_code=int(raw.get("projectCode") or 0),
            definition_code=int(raw.get(profile.instance_definition_field) or 0),
            state=workflow_state_name(raw.get("state")),
            command_type=str(raw.get("commandType") or ""),
            schedule_time=parse_ds_time(raw.get("scheduleTime"), zone),
            start_time=parse_ds_time(raw.get("startTime"), zone),
            end_time=parse_ds_time(raw.get("endTime"), zone),
            run_times=int(raw.get("runTimes") or 0),
            host=str(raw.get("host") or ""),
            marker=marker_of(raw),
            duration=str(raw.get("duration") or ""),
            definition_version=int(
                raw.get(profile.instance_definition_field.replace("Code", "Version")) or 0
            ),
            raw=raw,
        )


@dataclass(frozen=True)
class CronSchedule:
    """A workflow's schedule: its Quartz cron, zone, validity window and release state."""

    id: int
    definition_code: int
    crontab: str
    timezone: str
    start_time: str  # as DS gives it: `yyyy-MM-dd HH:mm:ss` in the server's JSON zone (sent back as is)
    end_time: str
    release_state: str  # ONLINE | OFFLINE

    @property
    def online(self) -> bool:
        """Whether DolphinScheduler fires it."""
        return self.release_state == "ONLINE"

    @classmethod
    def from_json(cls, raw: dict[str, Any], profile: Profile) -> CronSchedule:
        """Build from a schedule JSON object of the given profile."""
        return cls(
            id=int(raw["id"]),
            definition_code=int(raw.get(profile.instance_definition_field) or 0),
            crontab=str(raw.get("crontab") or ""),
            timezone=str(raw.get("timezoneId") or ""),
            start_time=str(raw.get("startTime") or ""),
            end_time=str(raw.get("endTime") or ""),
            release_state=str(raw.get("releaseState") or ""),
        )


@dataclass(frozen=True)
class LogPage:
    """Lines of a task log from line `skip` on (`/log/detail`); empty past the end."""

    skip: int
    lines: tuple[str, ...]

    @property
    def next_skip(self) -> int:
        """Where the next page starts."""
        return self.skip + len(self.lines)


@dataclass(frozen=True)
class TaskRun:
    """One task instance row: an attempt of a task inside a workflow instance."""

    id: int
    name: str
    task_code: int
    task_type: str
    instance_id: int
    state: str
    host: str  # worker "ip:port"; empty before dispatch
    retry_times: int
    max_retry_times: int
    start_time: datetime | None
    end_time: datetime | None
    current: bool  # flag YES; superseded retry attempts are flag NO
    log_path: str = ""

    @classmethod
    def from_json(cls, raw: dict[str, Any], profile: Profile, zone: tzinfo) -> TaskRun:
        """Build from a task-instance JSON object of the given profile."""
        return cls(
            id=int(raw["id"]),
            name=str(raw.get("name") or ""),
            task_code=int(raw.get("taskCode") or 0),
            task_type=str(raw.get("taskType") or ""),
            instance_id=int(raw.get(profile.task_instance_field) or 0),
            state=str(raw.get("state") or ""),
            host=str(raw.get("host") or ""),
            retry_times=int(raw.get("retryTimes") or 0),
            max_retry_times=int(raw.get("maxRetryTimes") or 0),
            start_time=parse_ds_time(raw.get("startTime"), zone),
            end_time=parse_ds_time(raw.get("endTime"), zone),
            current=str(raw.get("flag") or "YES") == "YES",
            log_path=str(raw.get("logPath") or ""),
        )


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a PageInfo answer."""

    items: list[T]
    total: int
    total_page: int
    current_page: int


@dataclass(frozen=True)
class StartResult:
    """What a start call returned: nothing (3.1), a trigger code (3.2) or instance ids (3.3)."""

    trigger_code: int | None = None
    instance_ids: tuple[int, ...] = ()
