"""Approve or reject a pending confirmation from the web page: the same rules and effects as chat.

`agent.session._approve/_reject` are the chat versions; these keep the same binding (the approver
is a different user holding an approver role, checked by `may_approve` and again inside the
conditional UPDATE of `PendingStore.approve`), resume the task the same way, and tell the
requester's conversation what happened. The requester's own `/confirm` stays in chat: it is bound
to the conversation the request came from, which a web page is not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent.audit import AuditEvent
from agent.errors import BotError
from agent.gate import Allow, may_approve

if TYPE_CHECKING:
    from agent.app import App
    from agent.ui.auth import Viewer


@dataclass(frozen=True)
class ActionResult:
    """What happened, for the flash message; `status` is the HTTP status of a refusal."""

    ok: bool
    message: str
    status: int = 200


def _audit(app: App, viewer: Viewer, outcome: str, action_id: int, reason: str, **fields: object) -> None:
    app.deps.audit.record(
        AuditEvent(
            at=app.deps.clock(),
            kind="confirm",
            actor=viewer.user,
            outcome=outcome,
            reason=reason,
            detail={"pending_id": action_id, "channel": "web", "via": viewer.via},
            **fields,  # type: ignore[arg-type]
        )
    )


def approve(app: App, viewer: Viewer, action_id: int) -> ActionResult:
    """Record the viewer as approver; run the task if that releases it; tell the requester."""
    deps = app.deps
    action = deps.pending.get(action_id)
    if action is None:
        return ActionResult(False, f"There is no pending action {action_id}.", 404)
    decision = may_approve(viewer.user, action.user_id, deps.settings.access)
    if not isinstance(decision, Allow):
        _audit(
            app,
            viewer,
            "approve_refused",
            action_id,
            decision.reason,
            task_id=action.task_id,
            tool=action.tool,
        )
        return ActionResult(False, f"Not approved: {decision.reason}.", 403)
    now = deps.clock()
    if not deps.pending.approve(action.id, viewer.user, now):
        fresh = deps.pending.get(action.id) or action
        why = (
            "expired"
            if fresh.status in ("pending", "confirmed") and fresh.expires_at <= now
            else fresh.status
        )
        return ActionResult(False, f"Action {action.id} is {why}; it cannot be approved.", 409)
    _audit(app, viewer, "approved", action_id, decision.reason, task_id=action.task_id, tool=action.tool)
    after = deps.pending.get(action.id)
    if after is not None and after.released:
        try:
            outcome = app.agent.resume(action.task_id)
        except BotError as exc:
            return ActionResult(True, f"Approved action {action.id}, but resuming failed: {exc}")
        deps.notify(action.conversation, outcome.reply)
        return ActionResult(True, f"Approved action {action.id}; it ran: {outcome.reply}")
    deps.notify(
        action.conversation,
        f"{viewer.user} approved action {action.id}; it runs after your /confirm {action.id}.",
    )
    return ActionResult(True, f"Approved action {action.id}; it runs once {action.user_id} confirms in chat.")


def reject(app: App, viewer: Viewer, action_id: int) -> ActionResult:
    """Refuse the action (nothing runs); the task resumes to tell the model, the requester is told."""
    deps = app.deps
    action = deps.pending.get(action_id)
    if action is None:
        return ActionResult(False, f"There is no pending action {action_id}.", 404)
    decision = may_approve(viewer.user, action.user_id, deps.settings.access)
    if not isinstance(decision, Allow):
        _audit(
            app,
            viewer,
            "reject_refused",
            action_id,
            decision.reason,
            task_id=action.task_id,
            tool=action.tool,
        )
        return ActionResult(False, f"Not allowed: {decision.reason}.", 403)
    if not deps.pending.close(action.id, "rejected", deps.clock()):
        return ActionResult(False, f"Action {action.id} is {action.status}.", 409)
    _audit(app, viewer, "rejected", action_id, decision.reason, task_id=action.task_id, tool=action.tool)
    try:
        outcome = app.agent.resume(action.task_id)
        tail = outcome.reply
    except BotError as exc:
        tail = f"(resuming failed: {exc})"
    deps.notify(action.conversation, f"{viewer.user} rejected action {action.id}. {tail}")
    return ActionResult(True, f"Rejected action {action.id}; nothing was run.")
