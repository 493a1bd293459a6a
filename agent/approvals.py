"""Approve or reject someone's pending production write: one implementation for chat and the web page.

The approver must be a different user holding an approver role (`may_approve`, and again inside
the conditional UPDATE of `PendingStore.approve`). Approving runs the task once the requester has
confirmed too; rejecting runs nothing. Either way the requester's conversation is told, and every
decision, refusals included, is audited with the channel it came from. The requester's own
`/confirm` stays in chat: it is bound to the conversation the request came from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from xihe.agent.audit import AuditEvent
from xihe.agent.errors import BotError
from xihe.agent.gate import Allow, may_approve
from xihe.agent.pending import expired

if TYPE_CHECKING:
    from xihe.agent.loop import Agent


@dataclass(frozen=True)
class Approver:
    """Who decides, and through which channel ('cli', 'wecom', 'web'; `via`: how the web login was made)."""

    user: str
    channel: str
    via: str = ""


@dataclass(frozen=True)
class ActionResult:
    """What happened, for the flash message; `status` is the HTTP status of a refusal."""

    ok: bool
    message: str
    status: int = 200


def _audit(
    agent: Agent, viewer: Approver, outcome: str, action_id: int, reason: str, **fields: object
) -> None:
    agent.deps.audit.record(
        AuditEvent(
            at=agent.deps.clock(),
            kind="confirm",
            actor=viewer.user,
            outcome=outcome,
            reason=reason,
            detail={"pending_id": action_id, "channel": viewer.channel, "via": viewer.via},
            **fields,  # type: ignore[arg-type]
        )
    )


def approve(agent: Agent, viewer: Approver, action_id: int) -> ActionResult:
    """Record the viewer as approver; run the task if that releases it; tell the requester."""
    deps = agent.deps
    action = deps.pending.get(action_id)
    if action is None:
        return ActionResult(False, f"There is no pending action {action_id}.", 404)
    decision = may_approve(viewer.user, action.user_id, deps.settings.access)
    if not isinstance(decision, Allow):
        _audit(
            agent,
            viewer,
            "approve_refused",
            action_id,
            decision.reason,
            task_id=action.task_id,
            tool=action.tool,
        )
        return ActionResult(False, f"Not approved: {decision.reason}.", 403)
    now = deps.clock()
    if not agent.hold(action.task_id):  # a crash after the approval leaves a lease that lapses
        return ActionResult(
            False, f"Task {action.task_id} is being worked on elsewhere; try again shortly.", 409
        )
    if not deps.pending.approve(action.id, viewer.user, now):
        deps.tasks.release(action.task_id, deps.holder)
        fresh = deps.pending.get(action.id) or action
        why = "expired" if expired(fresh, now) else fresh.status
        return ActionResult(False, f"Action {action.id} is {why}; it cannot be approved.", 409)
    _audit(agent, viewer, "approved", action_id, decision.reason, task_id=action.task_id, tool=action.tool)
    after = deps.pending.get(action.id)
    if after is None or not after.released:
        deps.tasks.release(action.task_id, deps.holder)
    if after is not None and after.released:
        try:
            outcome = agent.resume(action.task_id)
        except BotError as exc:
            return ActionResult(True, f"Approved action {action.id}, but resuming failed: {exc}")
        deps.notify(action.conversation, outcome.reply)
        return ActionResult(True, f"Approved action {action.id}; it ran: {outcome.reply}")
    deps.notify(
        action.conversation,
        f"{viewer.user} approved action {action.id}; it runs after your /confirm {action.id}.",
    )
    return ActionResult(True, f"Approved action {action.id}; it runs once {action.user_id} confirms in chat.")


def reject(agent: Agent, viewer: Approver, action_id: int) -> ActionResult:
    """Refuse the action (nothing runs); the task resumes to tell the model, the requester is told."""
    deps = agent.deps
    action = deps.pending.get(action_id)
    if action is None:
        return ActionResult(False, f"There is no pending action {action_id}.", 404)
    decision = may_approve(viewer.user, action.user_id, deps.settings.access)
    if not isinstance(decision, Allow):
        _audit(
            agent,
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
    _audit(agent, viewer, "rejected", action_id, decision.reason, task_id=action.task_id, tool=action.tool)
    try:
        outcome = agent.resume(action.task_id)
        tail = outcome.reply
    except BotError as exc:
        tail = f"(resuming failed: {exc})"
    deps.notify(action.conversation, f"{viewer.user} rejected action {action.id}. {tail}")
    return ActionResult(True, f"Rejected action {action.id}; nothing was run.")
