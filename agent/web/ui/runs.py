"""`/ui/runs/ID`: the page every alert links to — what failed, and the run's trace.

What DolphinScheduler says now (run_facts.py: state, failed tasks, error, log tail, times), the
task that started the run apart from tasks that only looked at it (`/status ID`), its alerts, and
its DolphinScheduler page. Alerts link here (`public_base_url` + `/ui/runs/ID`), tasks link here from their runs, and this page
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
from xihe.agent.web.ui.params import MAX_ID, BadParam, int_param
from xihe.agent.web.ui.run_facts import MAX_LOG_LINE, PAGE_LINES, LogRequest, read_run
from xihe.agent.web.ui.visibility import may_see, owner_filter
from xihe.config.alerts import ALERTS_SECTION

EVENT_COLUMNS = ("at", "kind", "reason", "tier", "workflow", "task", "detail", "notification_key")


class Runs:
    """Runs under agent/web/ui/visibility.py's rule (owners: those of the tasks that started the run)."""

    def __init__(self, ui: Pages) -> None:
        self.ui = ui

    def routes(self) -> list[BaseRoute]:
        return [Route("/ui/runs/{run_id:int}", self.ui.page(self.run))]

    def run(self, request: Request, viewer: Viewer, form: dict[str, str]) -> Response:
        """The trace of one run."""
        deps = self.ui.app.deps
        run_id = int(request.path_params["run_id"])
        tasks = deps.tasks.with_run(run_id)
        if not may_see(viewer, {t.owner for t in tasks}):
            return self.ui.error(
                request, viewer, 403, "Not yours", f"Run {run_id} was not started by one of your tasks."
            )
        only = owner_filter(viewer)
        tasks = [t for t in tasks if only is None or t.owner == only]
        alerts = data.alert_events(deps.engine, limit=200, instance_ids=[run_id])
        if alerts is not None:
            alerts = (list(EVENT_COLUMNS), alerts[1])
        origin = SqlRunOrigins(deps.engine).find(run_id)
        page = self._log_request(request)
        facts = read_run(deps, run_id, page=page)
        if page is not None and not facts.problem and all(f.task_id != page.task_id for f in facts.failed):
            raise BadParam("task", f"{page.task_id} is not a failed task of run {run_id}")
        started = [t for t in tasks if origin is not None and str(t.id) == origin.task_id]
        return self.ui.render(
            request,
            "run.html",
            viewer,
            refresh=REFRESH_SECONDS if (facts.state and not facts.final) else 0,
            run_id=run_id,
            facts=facts,
            started=started,
            queried=[t for t in tasks if t not in started],
            alerts=alerts,
            ds_url=self._ds_url(run_id),
        )

    @staticmethod
    def _log_request(request: Request) -> LogRequest | None:
        """`?task=ID&from=N&lines=K`: one page of a failed task's log (all bounded; `from` and `lines`
        need `task`)."""
        q = request.query_params
        task_id = int_param(q, "task", None, 1, MAX_ID)
        from_line = int_param(q, "from", None, 0, MAX_LOG_LINE)
        lines = int_param(q, "lines", None, 1, PAGE_LINES)
        if task_id is None:
            for name, value in (("from", from_line), ("lines", lines)):
                if value is not None:
                    raise BadParam(name, "needs task (the failed task whose log to page)")
            return None
        return LogRequest(task_id, from_line or 0, lines or PAGE_LINES)

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
