"""/ui/pending: open confirmations, and approve / reject with the chat's rules (agent.approvals)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from xihe.agent import approvals, pending_view
from xihe.agent.gate import Allow, may_approve
from xihe.agent.pending import expired
from xihe.agent.web.ui.auth import Viewer
from xihe.agent.web.ui.page import Pages


class Pending:
    """Requesters see their own actions; approvers act on others' (never their own)."""

    def __init__(self, ui: Pages) -> None:
        self.ui = ui

    def routes(self) -> list[BaseRoute]:
        p = self.ui.page
        return [
            Route("/ui/pending", p(self.pending)),
            Route("/ui/pending/{action_id:int}/approve", p(self.approve), methods=["POST"]),
            Route("/ui/pending/{action_id:int}/reject", p(self.reject), methods=["POST"]),
        ]

    def pending(self, request: Request, viewer: Viewer, form: dict[str, str]) -> Response:
        app = self.ui.app
        deps = app.deps
        now = deps.clock()
        rows = []
        for p in self.ui.visible_pending(viewer):
            may = isinstance(may_approve(viewer.user, p.user_id, deps.settings.access), Allow)
            live = not expired(p, now)
            rows.append(
                {
                    "p": p,
                    "view": pending_view.view(p, deps, app.registry),
                    "expired": not live,
                    "minutes_left": max(0, int((p.expires_at - now).total_seconds() // 60)),
                    "can_approve": may and live and p.needs_approval and p.approved_by is None,
                    "can_reject": may and live,
                    "mine": p.user_id == viewer.user,
                }
            )
        return self.ui.render(request, "pending.html", viewer, rows=rows)

    def _act(self, request: Request, viewer: Viewer, verb: str) -> Response:
        action_id = int(request.path_params["action_id"])
        fn = approvals.approve if verb == "approve" else approvals.reject
        result = fn(self.ui.app.agent, approvals.Approver(viewer.user, "web", viewer.via), action_id)
        if result.status == 403:
            return self.ui.error(request, viewer, 403, "Refused", result.message)
        return self.ui.flash_redirect("/ui/pending", result.message, result.ok)

    def approve(self, request: Request, viewer: Viewer, form: dict[str, str]) -> Response:
        return self._act(request, viewer, "approve")

    def reject(self, request: Request, viewer: Viewer, form: dict[str, str]) -> Response:
        return self._act(request, viewer, "reject")
