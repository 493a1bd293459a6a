"""`POST /hooks/dolphinscheduler`: authenticate, validate and parse DolphinScheduler's HTTP alert plugin.

The plugin posts its `bodyParams` JSON with the alert text put under a configurable field (the
`contentField`, often `msg`, `content` or `text`). The alert text is the title and/or the content,
and the content is a JSON array of `ProcessAlertContent`: on a
failure, one item per non-successful task, with processId, processName, taskName, taskState,
taskHost, taskStartTime/taskEndTime and logPath. Each usable item becomes an AlertEvent (mapped by
`from_report`: the workflow's state and the task's are given apart). The route (`sources.py`) calls
`handle_ds_webhook`, feeds the events to the alert pipeline and answers with the status it returns.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from xihe.agent.alert_event import AlertEvent
from xihe.agent.alerts.event import EventError, from_report

MAX_BODY = 1_000_000
CONTENT_FIELDS = ("content", "msg", "text", "message", "alertContent")


class ProcessAlertContent(BaseModel):
    """One item of DolphinScheduler's alert content (only the fields xihe uses are typed)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    projectCode: int | None = Field(None, description="project code")
    projectName: str = Field("", description="project name")
    owner: str = Field("", description="workflow owner")
    processId: int = Field(description="workflow instance id")
    processDefinitionCode: int | None = Field(None, description="workflow definition code")
    processName: str = Field(description="workflow instance name (definition name plus a run suffix)")
    processState: str = Field("", description="workflow state (success alerts only)")
    processStartTime: str | None = Field(None, description="yyyy-MM-dd HH:mm:ss, server time")
    processEndTime: str | None = Field(None, description="yyyy-MM-dd HH:mm:ss, server time")
    processHost: str = Field("", description="master host")
    taskCode: int | None = Field(None, description="task definition code")
    taskName: str = Field("", description="task name")
    taskType: str = Field("", description="task type")
    taskState: str = Field("", description="task state, e.g. FAILURE, KILL")
    taskStartTime: str | None = Field(None, description="task start")
    taskEndTime: str | None = Field(None, description="task end")
    taskHost: str = Field("", description="worker host ip:port")
    logPath: str = Field("", description="log file path on the worker")
    retryTimes: int | None = Field(None, description="only in the worker fault-tolerance alert")


def authenticate(headers: Mapping[str, str], secret: str, header: str = "X-Xihe-Token") -> bool:
    """Constant-time check of the shared secret (in `header`, or `Authorization: Bearer …`)."""
    if not secret:
        return False  # an unset secret must not open the door
    lower = {k.lower(): v for k, v in headers.items()}
    given = lower.get(header.lower(), "")
    if not given and lower.get("authorization", "").startswith("Bearer "):
        given = lower["authorization"][7:]
    return hmac.compare_digest(given.encode("utf-8"), secret.encode("utf-8"))


def _ds_time(value: str | None, tz: ZoneInfo) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=tz)


def _find_content(body: Any) -> tuple[str, Any]:
    """(title, content array) from the plugin's body, however the admin mapped the fields."""
    if isinstance(body, list):
        return "", body
    if not isinstance(body, dict):
        raise ValueError("body must be a JSON object or array")
    title = str(body.get("title", ""))
    for name in CONTENT_FIELDS:
        if name in body:
            value = body[name]
            if isinstance(value, list):
                return title, value
            text = str(value)
            start = text.find("[")
            if start < 0:
                raise ValueError(f"field {name!r} holds no JSON array of alert items")
            if not title and start > 0:
                title = text[:start].strip()
            try:
                items = json.loads(text[start:])
            except json.JSONDecodeError as exc:
                raise ValueError(f"field {name!r}: alert content is not valid JSON ({exc.msg})") from None
            return title, items
    raise ValueError(f"no alert content field (looked for {', '.join(CONTENT_FIELDS)})")


def _workflow_name(process_name: str) -> str:
    """DS names an instance `<definition>-<n>-<timestamp>`; the alert shows the instance name."""
    parts = process_name.rsplit("-", 2)
    if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
        return parts[0]
    return process_name


@dataclass(frozen=True)
class Parsed:
    """A post's usable events, and the items that were not usable as (where, problem)."""

    events: list[AlertEvent] = field(default_factory=list)
    bad: list[tuple[str, str]] = field(default_factory=list)


def parse_payload(body: bytes, now: datetime, ds_timezone: str = "Asia/Shanghai") -> Parsed:
    """Validate the plugin's body and turn each non-successful task item into an AlertEvent.

    A body that is not JSON or holds no alert content raises ValueError; an item that is not
    usable is listed in `bad` and the others are still returned."""
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"body is not UTF-8 JSON: {exc}") from None
    title, items = _find_content(data)
    if not isinstance(items, list):
        raise ValueError("alert content must be a JSON array")
    tz = ZoneInfo(ds_timezone)
    failed_title = "fail" in title.lower()
    out = Parsed()
    for i, raw in enumerate(items):
        try:
            item = ProcessAlertContent.model_validate(raw)
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            where = ".".join(str(p) for p in first["loc"])
            out.bad.append((f"webhook:item {i}", f"item {i}: {where}: {first['msg']}"))
            continue
        state = item.processState.upper() or ("FAILURE" if failed_title or item.taskState else "")
        # a success alert (DolphinScheduler's warning type SUCCESS or ALL) resolves the alert of that
        # instance, or of an earlier run of the same workflow and business date
        try:
            event = from_report(
                state,
                item.taskName,
                item.taskState.upper(),
                at=now.astimezone(UTC),
                project=item.projectName,
                workflow=_workflow_name(item.processName),
                workflow_code=item.processDefinitionCode or 0,
                instance_id=item.processId,
                host=item.taskHost,
                error=f"{item.taskType} task {item.taskState}".strip() if item.taskState else "",
                retry_times=item.retryTimes or 0,
                start_time=_ds_time(item.taskStartTime or item.processStartTime, tz),
                end_time=_ds_time(item.taskEndTime or item.processEndTime, tz),
                source="webhook",
            )
        except EventError as exc:
            out.bad.append((f"webhook:item {i}", f"item {i}: {exc}"))
            continue
        out.events.append(event)
    return out


def handle_ds_webhook(
    headers: Mapping[str, str],
    body: bytes,
    secret: str,
    now: datetime,
    header: str = "X-Xihe-Token",
    ds_timezone: str = "Asia/Shanghai",
) -> tuple[int, Parsed | str]:
    """(HTTP status, parsed post or error text): 401 bad secret, 413 too large, 400 invalid (or no item
    usable: the bad items are in the Parsed), 200 parsed."""
    if not authenticate(headers, secret, header):
        return 401, "missing or wrong shared secret"
    if len(body) > MAX_BODY:
        return 413, f"body larger than {MAX_BODY} bytes"
    try:
        parsed = parse_payload(body, now, ds_timezone)
    except ValueError as exc:
        return 400, str(exc)
    return (400 if parsed.bad and not parsed.events else 200), parsed
