"""/ui/pending: open confirmations, and approve / reject with the chat's rules (agent.approvals);
/ui/pending/ID: one action in any state. Each says where the action stands in the words its WeCom
card uses (`xihe.agent.cards.state_text`): confirmed by, approved by, rejected by whom and why,
expired, executed, the run it started and how that ended."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from xihe.agent import action_commands, approvals, pending_view
from xihe.agent.cards import run_seen, state_text
from xihe.agent.commands import Command
from xihe.agent.errors import TaskStateError
from xihe.agent.gate import Allow, may_approve
from xihe.agent.inbound import Inbound
from xihe.agent.pending import PendingAction, expired, mcp_conversation
from xihe.agent.timefmt import show
from xihe.agent.web.ui.auth import Viewer
from xihe.agent.web.ui.page import REFRESH_SECONDS, Pages
from xihe.agent.web.ui.visibility import owner_filter


class Pending:
    """Requesters see their own actions; approvers act on others' (never their own)."""

    def __init__(self, ui: Pages) -> None:
        self.ui = ui

    def routes(self) -> list[BaseRoute]:
        p = self.ui.page
        return [
            Route("/ui/pending", p(self.pending)),
            Route("/ui/pending/{action_id:int}", p(self.one)),
            Route("/ui/pending/{action_id:int}/approve", p(self.approve), methods=["POST"]),
            Route("/ui/pending/{action_id:int}/reject", p(self.reject), methods=["POST"]),
            Route("/ui/pending/{action_id:int}/confirm", p(self.confirm), methods=["POST"]),
        ]

    def _row(self, viewer: Viewer, p: PendingAction) -> dict[str, object]:
        deps = self.ui.app.deps
        now = deps.clock()
        may = isinstance(may_approve(viewer.user, p.user_id, deps.settings.access), Allow)
        live = p.status in ("pending", "confirmed") and not expired(p, now)
        try:
            task = deps.tasks.get(p.task_id) if p.status == "executed" else None
        except TaskStateError:
            task = None
        tz = deps.settings.core.timezone
        run = run_seen(task)
        state = state_text(
            p,
            pending_view.approvers_for(p, deps),
            lambda t: show(t, tz, seconds=False) if t else "-",
            run=run,
        )
        return {
            "p": p,
            "view": pending_view.view(p, deps, self.ui.app.registry),
            "state": state,
            "expired": p.status == "expired" or (p.status in ("pending", "confirmed") and not live),
            "live": live,
            "run_open": run is not None and not run.ended,  # its run has not ended yet
            "minutes_left": max(0, int((p.expires_at - now).total_seconds() // 60)),
            "can_approve": may and live and p.needs_approval and p.approved_by is None,
            "can_reject": may and live,
            "mine": p.user_id == viewer.user,
            # an MCP client's action has no chat to answer in: its requester may confirm it here too
            "from_mcp": p.conversation == mcp_conversation(p.user_id),
            "can_confirm": p.user_id == viewer.user
            and live
            and p.status == "pending"
            and p.conversation == mcp_conversation(p.user_id),
        }

    def pending(self, request: Request, viewer: Viewer, form: dict[str, str]) -> Response:
        rows = [self._row(viewer, p) for p in self.ui.visible_pending(viewer)]
        # always: new actions arrive, others' confirmations and approvals move the ones shown
        return self.ui.render(request, "pending.html", viewer, rows=rows, one=None,
                              refresh=REFRESH_SECONDS, refresh_why="")  # fmt: skip

    def one(self, request: Request, viewer: Viewer, form: dict[str, str]) -> Response:
        """One action in any state (its requester's, or anyone's for those who see everything)."""
        action = self.ui.app.deps.pending.get(int(request.path_params["action_id"]))
        only = owner_filter(viewer)
        if action is None or (only is not None and action.user_id != only):
            return self.ui.error(request, viewer, 404, "Not found", "No such pending action.")
        row = self._row(viewer, action)
        moving = row["live"] or row["run_open"]
        return self.ui.render(
            request, "pending.html", viewer, rows=[row], one=action.id,
            refresh=REFRESH_SECONDS if moving else 0, refresh_why=" while the action moves on",
        )  # fmt: skip

    def _act(self, request: Request, viewer: Viewer, verb: str) -> Response:
        action_id = int(request.path_params["action_id"])
        fn = approvals.approve if verb == "approve" else approvals.reject
        result = fn(self.ui.app.agent, approvals.Approver(viewer.user, "web", viewer.via), action_id)
        if result.status == 403:
            return self.ui.error(request, viewer, 403, "Refused", result.message)
        return self.ui.flash_redirect("/ui/pending", result.message, result.ok)

    def confirm(self, request: Request, viewer: Viewer, form: dict[str, str]) -> Response:
        """The requester's own yes to an action an MCP client asked for: the chat's `/confirm ID`, same
        rules (its user only, bound arguments, expiry), said from the web session."""
        action_id = int(request.path_params["action_id"])
        action = self.ui.app.deps.pending.get(action_id)
        if (
            action is None
            or action.user_id != viewer.user
            or action.conversation != mcp_conversation(viewer.user)
        ):
            return self.ui.error(
                request, viewer, 403, "Refused", "Only its requester confirms an MCP action here."
            )
        msg = Inbound(viewer.user, f"web:{viewer.user}", f"/confirm {action_id}", channel="web", lang="en")
        said = action_commands.confirm(
            self.ui.app, viewer.who, msg, Command("confirm", (str(action_id),), str(action_id))
        )
        done = self.ui.app.deps.pending.get(action_id)
        ok = done is not None and done.status in ("confirmed", "executed")
        return self.ui.flash_redirect(f"/ui/pending/{action_id}", said, ok)

    def approve(self, request: Request, viewer: Viewer, form: dict[str, str]) -> Response:
        return self._act(request, viewer, "approve")

    def reject(self, request: Request, viewer: Viewer, form: dict[str, str]) -> Response:
        return self._act(request, viewer, "reject")
