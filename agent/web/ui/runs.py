"""`/ui/runs/ID`: one run's trace — the task(s) that started it, its alerts, and its DolphinScheduler page.

Alerts link here (`public_base_url` + `/ui/runs/ID`), tasks link here from their runs, and this page
links back to both, so alert ↔ task ↔ run is one click each way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response

from xihe.agent.web.ui import data
from xihe.agent.web.ui.auth import Viewer

if TYPE_CHECKING:
    from xihe.agent.web.ui.views import WebUI

EVENT_COLUMNS = ("at", "kind", "reason", "tier", "workflow", "task", "detail", "notification_key")


def run_page(ui: WebUI, request: Request, viewer: Viewer, form: dict[str, str]) -> Response:
    """The trace of one run; a viewer who sees only their own tasks sees only their own runs."""
    deps = ui.app.deps
    run_id = int(request.path_params["run_id"])
    tasks = deps.tasks.with_run(run_id)
    if not viewer.sees_all:
        if not any(t.owner == viewer.user for t in tasks):
            return ui.render(
                request, "error.html", viewer, 403, title="Not yours",
                message=f"Run {run_id} was not started by one of your tasks.",
            )  # fmt: skip
        tasks = [t for t in tasks if t.owner == viewer.user]
    alerts = data.recent_rows(deps.engine, "alert_event", limit=200, where={"instance_id": [run_id]})
    if alerts is not None:
        alerts = (data.pick(alerts[0], EVENT_COLUMNS), alerts[1])
    return ui.render(
        request,
        "run.html",
        viewer,
        refresh=10 if any(not data.is_finished(t) for t in tasks) else 0,
        run_id=run_id,
        tasks=tasks,
        alerts=alerts,
        ds_url=_ds_url(ui, run_id),
    )


def _ds_url(ui: WebUI, run_id: int) -> str:
    """The run's page in DolphinScheduler's UI, from alerts.yaml's template (needs the project code)."""
    cfg: Any = ui.app.deps.settings.section("alerts")
    template = getattr(cfg, "dolphinscheduler_instance_url", "") if cfg is not None else ""
    if not template:
        return ""
    from xihe.agent.alerts.origin import SqlRunOrigins

    origin = SqlRunOrigins(ui.app.deps.engine).find(run_id)
    if origin is None and "{project_code}" in template:
        return ""
    try:
        return str(template.format(project="", project_code=origin.project_code if origin else 0,
                                   workflow_code="", instance_id=run_id))  # fmt: skip
    except (KeyError, IndexError, ValueError):
        return ""
