"""Messages built from pipeline state: one instance alert, or a window's message split into parts.

The pipeline decides *that* a message goes out and under which key; this module decides what it
says. An instance alert carries what on-call needs at 3 am (tier, workflow, environment, failed
tasks with retries, host, error line, log tail, who started the run, times with their zone, links
and the next commands). A window message names every instance it counts: when the ids do not fit
in one message (WeCom: 4096 bytes) the rest go into numbered continuation parts, keys `KEY#2`, ...
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote, urlsplit

from xihe.agent.alert_event import AlertEvent
from xihe.agent.alerts.model import Kind, Notification, Tier
from xihe.agent.alerts.render import Renderer, duration_seconds
from xihe.agent.alerts.state import InstanceState, Repeat, Window
from xihe.agent.wecom_markdown import Url, checked_url

if TYPE_CHECKING:
    from xihe.config.alerts import AlertsConfig
    from xihe.config.workflows import Workflow


@dataclass(frozen=True)
class RunOrigin:
    """How a run came to be, when the bot started it: the task, who asked, who approved, backfill?"""

    task_id: str
    started_by: str
    approved_by: str = ""
    backfill: bool = False
    project_code: int = 0


class Origins(Protocol):
    """Finds the bot's own run behind an instance id (the ds_watch rows); None for other runs."""

    def find(self, instance_id: int) -> RunOrigin | None:
        """The origin of `instance_id`, or None when the bot did not start it."""


class NoOrigins:
    """No run store (replay): every run counts as started outside the bot."""

    def find(self, instance_id: int) -> RunOrigin | None:
        """Always None."""
        return None


def links(
    config: AlertsConfig, event: AlertEvent, origin: RunOrigin | None, log_url: str = ""
) -> dict[str, Url | str | None]:
    """The run's trace page in xihe's UI, its page in DolphinScheduler and its log, as checked `Url`s
    (None when not configured). The event's own values are quoted into the configured addresses, and
    a log address the event brings is a link only under one of them (else it is shown as text)."""
    base = config.public_base_url.rstrip("/")
    # the run's page names the task that started it (if any) and every alert about it
    trace = checked_url(f"{base}/ui/runs/{event.instance_id}") if base else None
    ds = None
    template = config.dolphinscheduler_instance_url
    project_code = origin.project_code if origin else 0
    if template and (project_code or "{project_code}" not in template):
        ds = checked_url(
            template.format(
                project=quote(event.project, safe=""),
                project_code=project_code,
                workflow_code=event.workflow_code,
                instance_id=event.instance_id,
            )
        )
    parts = urlsplit(template)
    bases = [b for b in (base, f"{parts.scheme}://{parts.netloc}" if parts.netloc else "") if b]
    log = checked_url(log_url, bases) if bases else None
    return {"trace_url": trace, "ds_url": ds, "log_url": log or log_url}


def instance_note(
    renderer: Renderer,
    config: AlertsConfig,
    inst: InstanceState,
    wf: Workflow | None,
    environment: str,
    origin: RunOrigin | None,
    now: datetime,
    key: str,
    oncall: tuple[str, ...] | None = None,
    alert: str = "",
) -> Notification:
    """The alert for one failed instance (a follow-up when `inst.followups` > 0); a P0 mentions
    `oncall` (who is on call now), else the workflow's own `oncall` list."""
    first = inst.events[0]
    on_duty = oncall if oncall is not None else tuple(wf.oncall) if wf is not None else ()
    mentions = on_duty if wf is not None and inst.tier is Tier.P0 else ()
    starts = [e.start_time for e in inst.events if e.start_time]
    ends = [e.end_time or e.at for e in inst.events]
    start = min(starts) if starts else None
    # DolphinScheduler's own end time of the failed task/instance; when xihe noticed only without one
    failed_at = min(e.end_time or e.at for e in inst.events)
    end = max(ends) if ends else None
    hosts = list(dict.fromkeys(e.host for e in inst.events if e.host))
    error = next((e.error for e in inst.events if e.error), "")
    log = next((e.log_tail for e in inst.events if e.log_tail), "")
    tasks: dict[str, dict[str, Any]] = {}
    for e in inst.events:
        name = e.task_name or "-"
        if name not in tasks or e.retry_times > tasks[name]["retry"]:
            tasks[name] = {"name": name, "retry": e.retry_times, "max": e.max_retry_times}
    if len(tasks) > 1:
        tasks.pop("-", None)  # the workflow event whose task is named by a task event
    scope = f"workflow:{first.workflow}"
    ctx: dict[str, Any] = {
        "mentions": mentions,
        "tier": inst.tier.value,
        "followup": inst.followups,
        "workflow_name": first.workflow,
        "project_name": first.project or "-",
        "instance_id": inst.instance_id,
        "environment": environment or "-",
        "task_list": list(tasks.values()),
        "task_more": inst.extra_tasks,
        "host_list": hosts or ["-"],
        "failed_at": failed_at,
        "start": start,
        "end": end,
        "seconds": duration_seconds(start, end),
        "summary_error": error or "-",
        "tail_log": log,
        "origin": origin,
        "started_by_name": origin.started_by if origin else "",
        "approved_by_name": origin.approved_by if origin else "",
        "next_summary": inst.next_summary_at,
        "maint_scope": scope,
        "alert_short": alert,  # the alert's own short id (A7), when the lifecycle runs
        **links(config, first, origin, next((e.log_url for e in inst.events if e.log_url), "")),
        **_repeat_ctx(config, inst),
    }
    text = renderer.render("instance.md.j2", ctx)
    more = f" (update {inst.followups})" if inst.followups else ""
    if inst.repeat is not None:
        more += f" ({_ordinal(inst.repeat.count)} time in {_minutes(inst.repeat)} minutes)"
    subject = f"[xihe {inst.tier.value}] {first.workflow} #{inst.instance_id} failed{more}"
    return Notification(key, Kind.INSTANCE, inst.tier, inst.channel, now, text, subject, mentions)


def _minutes(rep: Repeat) -> int:
    return max(1, round((rep.last_at - rep.first_at).total_seconds() / 60))


def _ordinal(n: int) -> str:
    words = {2: "second", 3: "third", 4: "fourth", 5: "fifth"}
    return words.get(n, f"{n}th")


def _repeat_ctx(config: AlertsConfig, inst: InstanceState) -> dict[str, Any]:
    """The repeat line of an instance alert: the how-many-th time, within how long, and the first run."""
    rep = inst.repeat
    if rep is None:
        return {"repeat_count": 0, "repeat_minutes": 0, "first_instance": 0, "first_url": None}
    base = config.public_base_url.rstrip("/")
    return {
        "repeat_count": rep.count,
        "repeat_minutes": _minutes(rep),
        "first_instance": rep.first_instance,
        "first_url": checked_url(f"{base}/ui/runs/{rep.first_instance}") if base else None,
    }


_TITLES = {
    Kind.AGGREGATE: ("same error", "同类错误汇总"),
    Kind.SUMMARY: ("retried and failed", "重试后仍失败汇总"),
    Kind.MAINT: ("suppressed during maintenance", "维护期间屏蔽的失败"),
}


def window_notes(
    renderer: Renderer,
    w: Window,
    tier: Tier,
    now: datetime,
    template: str,
    kind: Kind,
    key: str,
    extra: dict[str, Any],
    short: Callable[[int], str] = lambda _instance_id: "",
) -> list[Notification]:
    """A window's message, naming every instance with its alert's short id when it has one
    (`101（A7）`, for `/ack A7`); continuation parts when the ids do not fit."""
    mentions = w.mentions if tier is Tier.P0 else ()
    node = kind is Kind.NODE

    # a node follow-up or escalation names only what its alerts did not (w.named of them were named
    # already); instances alerted on their own before the storm are named apart, in its first alert only
    listed = [i for i in w.instances[w.named if node else 0 :] if not (node and i in w.alerted)]
    apart = list(w.alerted) if node and not w.named else []
    shorts = {i: short(i) for i in [*listed, *apart]}
    ids = [f"{i}（{shorts[i]}）" if shorts[i] else str(i) for i in listed]
    alerted = [f"{i}（{shorts[i]}）" if shorts[i] else str(i) for i in apart]
    ctx: dict[str, Any] = {
        "mentions": mentions,
        "tier": tier.value,
        "folded": w.folded,
        "total": w.total,
        "instance_count": len(w.instances),
        "opened": w.opened_at,
        "ends": w.ends_at,
        "workflow_list": [{"name": n, "count": c} for n, c in w.workflows],
        "host_list": list(w.hosts) or ["-"],
        "sample_name": w.sample.workflow,
        "sample_task_name": w.sample.task_name or "-",
        "sample_error": w.sample.error or "-",
        "latest_error": w.last_error or w.sample.error or "-",
        "host_name": w.key,
        "parts": 1,
        "listed_count": len(ids),
        "alerted": alerted,
        "ackable": any(shorts.values()),  # some instance has an alert to /ack
        # an escalation: how many instances the earlier node alert listed
        "earlier": sum(1 for i in w.instances[: w.named] if i not in w.alerted) if node else 0,
        **extra,
    }
    what, title = (
        (f"suspect node {w.key}", f"疑似节点故障：{w.key}")
        if kind is Kind.NODE
        else _TITLES.get(kind, (kind.value, kind.value))
    )
    subject = f"[xihe {tier.value}] {what}: {w.total} failure(s), {len(ids)} instance(s)"
    first_ids, rest = _fit(renderer, template, ctx, ids)
    chunks = [first_ids, *_chunks(renderer, tier, rest)]
    notes: list[Notification] = []
    for n, chunk in enumerate(chunks, 1):
        if n == 1:
            text = renderer.render(template, {**ctx, "instances": chunk, "parts": len(chunks)})
        else:
            text = renderer.render(
                "more.md.j2",
                {"tier": tier.value, "title": title, "part": n, "parts": len(chunks), "instances": chunk},
            )
        part_key = key if n == 1 else f"{key}#{n}"
        notes.append(
            Notification(
                part_key,
                kind,
                tier,
                w.channel,
                now,
                text,
                subject + (f" ({n}/{len(chunks)})" if len(chunks) > 1 else ""),
                mentions if n == 1 else (),
            )
        )
    return notes


def _fits(renderer: Renderer, template: str, ctx: dict[str, Any], ids: Sequence[str]) -> bool:
    return renderer.fits(template, {**ctx, "instances": list(ids), "parts": 2})


def _fit(
    renderer: Renderer, template: str, ctx: dict[str, Any], ids: list[str]
) -> tuple[list[str], list[str]]:
    """The most ids (in order) the first message holds whole, and the rest."""
    if _fits(renderer, template, ctx, ids):
        return ids, []
    lo, hi = 0, len(ids)  # lo fits, hi does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _fits(renderer, template, ctx, ids[:mid]):
            lo = mid
        else:
            hi = mid
    return ids[:lo], ids[lo:]


def _chunks(renderer: Renderer, tier: Tier, ids: list[str]) -> list[list[str]]:
    """Split ids into continuation parts of at most the byte limit each (header included)."""
    budget = renderer.max_bytes - 200  # the part header: tier, title, part n/m
    out: list[list[str]] = []
    cur: list[str] = []
    size = 0
    for i in ids:
        add = len(i.encode()) + 3  # "、"
        if cur and size + add > budget:
            out.append(cur)
            cur, size = [], 0
        cur.append(i)
        size += add
    if cur:
        out.append(cur)
    return out
