"""/ui/audit: the audit trail with its filters, and /ui/audit.json (what `xihe audit search --json` prints)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from xihe.agent.web.ui.auth import Viewer
from xihe.agent.web.ui.page import Pages
from xihe.agent.web.ui.params import MAX_ID, int_param, page_param
from xihe.agent.web.ui.visibility import owner_filter
from xihe.tools.dolphin.names import names_of
from xihe.tools.dolphin.store import SqlCatalogStore


class Audit:
    """Audit events under agent/web/ui/visibility.py's rule (owners: the actor and the task's owner)."""

    def __init__(self, ui: Pages) -> None:
        self.ui = ui

    def routes(self) -> list[BaseRoute]:
        p = self.ui.page
        return [Route("/ui/audit", p(self.audit)), Route("/ui/audit.json", p(self.audit_json))]

    def _query(self, request: Request, viewer: Viewer) -> tuple[dict[str, Any], list[str]]:
        q = request.query_params
        since, until, errors = self.ui.query_times(request)
        task_id = int_param(q, "task", None, 0, MAX_ID)
        limit = int_param(q, "limit", self.ui.config.page_size, 1, 1000) or 1
        page = page_param(q)
        filters = dict(
            actor=(q.get("user") or None) if viewer.sees_all else None,  # others: what they may see
            visible_to=owner_filter(viewer),
            tool=q.get("tool") or None,
            outcome=q.get("outcome") or None,
            kind=q.get("kind") or None,
            task_id=task_id,
            since=since,
            until=until,
            text=(q.get("q") or "").strip() or None,
            workflow=self._workflow_names((q.get("workflow") or "").strip()),
            limit=limit,
            offset=(page - 1) * limit,
        )
        return filters, errors

    def _workflow_names(self, query: str) -> set[str] | None:
        """A workflow by any of its names (DS name, alias, code), as `xihe audit search --workflow`."""
        if not query:
            return None
        deps = self.ui.app.deps
        return names_of(query, deps.settings.workflows, SqlCatalogStore(deps.engine).entries())

    def audit(self, request: Request, viewer: Viewer, form: dict[str, str]) -> Response:
        filters, errors = self._query(request, viewer)
        limit, offset = filters["limit"], filters["offset"]
        rows = self.ui.app.deps.audit.search(**{**filters, "limit": limit + 1})  # one more: a next page?
        q = dict(request.query_params)
        params = {k: v for k, v in q.items() if k != "page" and v}
        page = offset // limit + 1
        return self.ui.render(
            request,
            "audit.html",
            viewer,
            rows=rows[:limit],
            first=offset + 1,
            q=q,
            errors=errors,
            json_url="/ui/audit.json?" + request.url.query,
            next_url=f"/ui/audit?{urlencode({**params, 'page': page + 1})}" if len(rows) > limit else None,
            prev_url=f"/ui/audit?{urlencode({**params, 'page': page - 1})}" if page > 1 else None,
        )

    def audit_json(self, request: Request, viewer: Viewer, form: dict[str, str]) -> Response:
        """Exactly what `xihe audit search --json` prints for the same filters."""
        filters, errors = self._query(request, viewer)
        if errors:
            return JSONResponse({"errors": errors}, status_code=400)
        rows = self.ui.app.deps.audit.search(**filters)
        body = json.dumps(rows, ensure_ascii=False, indent=2, default=str)
        return Response(body, media_type="application/json", headers=self.ui.headers)
