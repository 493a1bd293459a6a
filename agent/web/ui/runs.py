"""`/ui/runs/ID`: one run's trace — the task(s) that started it, its alerts, and its DolphinScheduler page.

Alerts link here (`public_base_url` + `/ui/runs/ID`), tasks link here from their runs, and this page
links back to both, so alert ↔ task ↔ run is one click each way.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from xihe.agent.dolphin.origin import SqlRunOrigins
from xihe.agent.web.ui import data
from xihe.agent.web.ui.auth import Viewer
from xihe.agent.web.ui.page import REFRESH_SECONDS, Pages
from xihe.config.alerts import ALERTS_SECTION

EVENT_COLUMNS = ("at", "kind", "reason", "tier", "workflow", "task", "detail", "notification_key")


class Runs:
    """A viewer who sees only their own tasks sees only the runs their tasks started."""

    def __init__(self, ui: Pages) -> None:
        self.ui = ui

    def routes(self) -> list[BaseRoute]:
        return [Route("/ui/runs/{run_id:int}", self.ui.page(self.run))]

    def run(self, request: Request, viewer: Viewer, form: dict[str, str]) -> Response:
        """The trace of one run."""
        deps = self.ui.app.deps
        run_id = int(request.path_params["run_id"])
        tasks = deps.tasks.with_run(run_id)
        if not viewer.sees_all:
            if not any(t.owner == viewer.user for t in tasks):
                return self.ui.error(
                    request, viewer, 403, "Not yours", f"Run {run_id} was not started by one of your tasks."
                )
            tasks = [t for t in tasks if t.owner == viewer.user]
        alerts = data.alert_events(deps.engine, limit=200, instance_ids=[run_id])
        if alerts is not None:
            alerts = (list(EVENT_COLUMNS), alerts[1])
        return self.ui.render(
            request,
            "run.html",
            viewer,
            refresh=REFRESH_SECONDS if any(not data.is_finished(t) for t in tasks) else 0,
            run_id=run_id,
            tasks=tasks,
            alerts=alerts,
            ds_url=self._ds_url(run_id),
        )

    def _ds_url(self, run_id: int) -> str:
        """The run's page in DolphinScheduler's UI, from alerts.yaml's template (needs the project code)."""
        deps = self.ui.app.deps
        cfg = deps.settings.get(ALERTS_SECTION)
        template = cfg.dolphinscheduler_instance_url if cfg is not None else ""
        if not template:
            return ""
        origin = SqlRunOrigins(deps.engine).find(run_id)
        if origin is None and "{project_code}" in template:
            return ""
        try:
            return str(template.format(project="", project_code=origin.project_code if origin else 0,
                                       workflow_code="", instance_id=run_id))  # fmt: skip
        except (KeyError, IndexError, ValueError):
            return ""
