"""What the alert channels hear of a maintenance window: a notice when `/maint on` opens it (scope,
end, who, and a warning when it silences P0 core workflows) and one when it ends, ran out or closed
by `/maint off` ("maintenance ended, N failures suppressed"). Pure: which channels a window covers
and the rows to queue; `AlertService` queues them in the same outbox as alerts.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from xihe.agent.alerts.maintenance import MaintenanceWindow
from xihe.agent.alerts.outbox import OutboxRow
from xihe.agent.alerts.render import Renderer

if TYPE_CHECKING:
    from xihe.config.workflows import Workflow

Phase = Literal["on", "end"]


def covered_channels(
    window: MaintenanceWindow, workflows: Iterable[Workflow], channels: Iterable[str]
) -> list[str]:
    """The alert channels whose workflows a window silences: every channel for `all` and for a host
    (any workflow may run there); for a project or a workflow, the channels its configured
    workflows alert in, else `default` (where an unconfigured workflow alerts)."""
    known = list(channels)
    scope = window.scope
    if scope.kind in ("all", "host"):
        return sorted(known)
    hit = {
        wf.channel
        for wf in workflows
        if (wf.project if scope.kind == "project" else wf.name) == scope.value and wf.channel in known
    }
    return sorted(hit or {"default"})


def notice_context(number: int, window: MaintenanceWindow, p0: list[str]) -> dict[str, Any]:
    """What both notices show: the window's number, scope, times, who opened it, P0 it covers."""
    return {
        "number": number,
        "scope": str(window.scope),
        "start": window.start,
        "end": window.end,
        "who": window.created_by or window.source,
        "p0_list": p0,
        "host": window.scope.kind == "host",
        "configured": window.source == "yaml",  # an alerts.yaml window: /maint off does not end it
        "name": window.note if window.source == "yaml" else "",
    }


def notice_rows(
    phase: Phase,
    renderers: dict[str, Renderer],
    context: dict[str, Any],
    now: datetime,
) -> list[OutboxRow]:
    """One pending row per channel (`renderers`: channel → its notifier's renderer), keyed by window
    number, phase and channel, so a second queueing (another replica, a retry) adds nothing."""
    template = f"maint_{phase}.md.j2"
    what = "on" if phase == "on" else "ended"
    subject = f"[xihe] maintenance #{context['number']} {context['scope']} {what}"
    return [
        OutboxRow(
            f"maint_{phase}:{context['number']}:{channel}",
            f"maint_{phase}",
            "P1",
            channel,
            subject,
            renderer.render(template, context),
            now,
            now,
        )
        for channel, renderer in renderers.items()
    ]
