"""/ui/tasks: the task list, one task's timeline (and its JSON), and the artifacts its steps kept."""

from __future__ import annotations

import json
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from xihe.agent import pending_view
from xihe.agent.errors import TaskStateError
from xihe.agent.pending import LIVE
from xihe.agent.report import task_data
from xihe.agent.tasks import Task
from xihe.agent.web.ui import data
from xihe.agent.web.ui.auth import Viewer
from xihe.agent.web.ui.page import REFRESH_SECONDS, Pages
from xihe.agent.web.ui.params import page_param
from xihe.agent.web.ui.visibility import may_see, owner_filter, visible_runs


class Tasks:
    """Tasks and artifacts under agent/web/ui/visibility.py's rule (owner: the task's owner)."""

    def __init__(self, ui: Pages) -> None:
        self.ui = ui

    def routes(self) -> list[BaseRoute]:
        p = self.ui.page
        return [
            Route("/ui/tasks", p(self.tasks)),
            Route("/ui/tasks/{task_id:int}", p(self.task)),
            Route("/ui/tasks/{task_id:int}.json", p(self.task_json)),
            Route("/ui/artifacts/{art_id:str}", p(self.artifact)),
        ]

    def tasks(self, request: Request, viewer: Viewer, form: dict[str, str]) -> Response:
        ui, q = self.ui, request.query_params
        since, until, errors = ui.query_times(request)
        f = data.TaskFilter(
            status=q.get("status") or None,
            owner=owner_filter(viewer) or q.get("user") or None,
            kind=q.get("kind") or None,
            since=since,
            until=until,
            text=(q.get("q") or "").strip() or None,
        )
        page = page_param(q)
        size = ui.config.page_size
        deps = ui.app.deps
        rows = data.list_tasks(deps.engine, f, limit=size + 1, offset=(page - 1) * size)
        params = {k: v for k, v in q.items() if k != "page" and v}
        shown = rows[:size]
        return ui.render(
            request,
            "tasks.html",
            viewer,
            refresh=REFRESH_SECONDS if any(not data.is_finished(t) for t in shown) else 0,
            tasks=shown,
            statuses=data.STATUSES,
            kinds=data.task_kinds(deps.engine),
            users=sorted(deps.settings.access.users),
            q=dict(q),
            errors=errors,
            page=page,
            next_url=f"/ui/tasks?{urlencode({**params, 'page': page + 1})}" if len(rows) > size else None,
            prev_url=f"/ui/tasks?{urlencode({**params, 'page': page - 1})}" if page > 1 else None,
        )

    def _task_or_error(self, request: Request, viewer: Viewer) -> Task | Response:
        task_id = int(request.path_params["task_id"])
        try:
            t = self.ui.app.deps.tasks.get(task_id)
        except TaskStateError:
            return self.ui.error(request, viewer, 404, "Not found", f"There is no task {task_id}.")
        if not may_see(viewer, [t.owner]):
            return self.ui.error(
                request, viewer, 403, "Not yours", f"Task {task_id} belongs to someone else."
            )
        return t

    def task(self, request: Request, viewer: Viewer, form: dict[str, str]) -> Response:
        t = self._task_or_error(request, viewer)
        if isinstance(t, Response):
            return t
        deps = self.ui.app.deps
        attempts, span = data.timeline(deps.tasks.steps(t.id), deps.clock(), data.is_finished(t))
        audit_rows = deps.audit.search(task_id=t.id, limit=500)
        ids = data.linked_ids(attempts, audit_rows)
        named = [
            int(v)
            for k, vs in ids.items()
            if "instance" in k
            for v in vs
            if str(v).isascii() and str(v).isdigit()
        ]
        instance_ids = visible_runs(deps.engine, viewer, named) or []  # a run named here may not be theirs
        alerts = data.alert_events(deps.engine, limit=50, instance_ids=instance_ids) if instance_ids else None
        pending = [p for p in deps.pending.open_for(statuses=LIVE) if p.task_id == t.id]
        return self.ui.render(
            request,
            "task.html",
            viewer,
            refresh=0 if data.is_finished(t) else REFRESH_SECONDS,
            task=t,
            attempts=attempts,
            span=span,
            audit=audit_rows,
            gates=[r for r in audit_rows if r["kind"] == "gate"],
            ids=ids,
            alerts=alerts,
            instance_ids=instance_ids,
            pending=[pending_view.view(p, deps, self.ui.app.registry) for p in pending],
        )

    def task_json(self, request: Request, viewer: Viewer, form: dict[str, str]) -> Response:
        t = self._task_or_error(request, viewer)
        if isinstance(t, Response):
            return t
        body = json.dumps(task_data(self.ui.app.deps, t.id), ensure_ascii=False, indent=2, default=str)
        return Response(body, media_type="application/json", headers=self.ui.headers)

    def artifact(self, request: Request, viewer: Viewer, form: dict[str, str]) -> Response:
        found = self.ui.app.deps.artifacts.get(request.path_params["art_id"])
        if found is None:
            return self.ui.error(request, viewer, 404, "Not found", "There is no such artifact.")
        ref, content, owner = found
        if not may_see(viewer, [owner]):
            return self.ui.error(
                request, viewer, 403, "Not yours", "This artifact belongs to someone else's task."
            )
        if request.query_params.get("raw"):
            return Response(
                content,
                media_type="text/plain; charset=utf-8",
                headers={**self.ui.headers, "Content-Disposition": "inline"},
            )
        return self.ui.render(
            request, "artifact.html", viewer, ref=ref, owner=owner, text=content.decode("utf-8", "replace")
        )
