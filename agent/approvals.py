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
from xihe.agent.i18n import Catalog, Lang, say
from xihe.agent.pending import expired

if TYPE_CHECKING:
    from xihe.agent.loop import Agent


TEXT: Catalog = {
    "no_action": {"en": "There is no pending action {id}.", "zh": "没有待处理的操作 {id}。"},
    "not_approved": {"en": "Not approved: {reason}.", "zh": "未批准：{reason}。"},
    "not_allowed": {"en": "Not allowed: {reason}.", "zh": "不允许：{reason}。"},
    "busy": {
        "en": "Task {task} is being worked on elsewhere; try again shortly.",
        "zh": "任务 {task} 正在别处处理，请稍后再试。",
    },
    "cannot_approve": {
        "en": "Action {id} is {status}; it cannot be approved.",
        "zh": "操作 {id} 已是 {status} 状态，不能批准。",
    },
    "approved_resume_failed": {
        "en": "Approved action {id}, but resuming failed: {error}",
        "zh": "已批准操作 {id}，但继续执行失败：{error}",
    },
    "approved_ran": {"en": "Approved action {id}; it ran: {reply}", "zh": "已批准操作 {id}，已执行：{reply}"},
    "approved_waits": {
        "en": "Approved action {id}; it runs once {user} confirms in chat.",
        "zh": "已批准操作 {id}；{user} 在聊天里确认后执行。",
    },
    "approved_notice": {
        "en": "{user} approved action {id}; it runs after your /confirm {id}.",
        "zh": "{user} 批准了操作 {id}；你 /confirm {id} 之后执行。",
    },
    "closed": {"en": "Action {id} is {status}.", "zh": "操作 {id} 已是 {status} 状态。"},
    "rejected": {"en": "Rejected action {id}; nothing was run.", "zh": "已驳回操作 {id}，没有执行任何操作。"},
    "rejected_notice": {"en": "{user} rejected action {id}. {tail}", "zh": "{user} 驳回了操作 {id}。{tail}"},
    "resume_failed": {"en": "(resuming failed: {error})", "zh": "（继续执行失败：{error}）"},
}


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


def approve(agent: Agent, viewer: Approver, action_id: int, lang: Lang = "en") -> ActionResult:
    """Record the viewer as approver; run the task if that releases it; tell the requester."""
    deps = agent.deps
    action = deps.pending.get(action_id)
    if action is None:
        return ActionResult(False, say(TEXT, "no_action", lang, id=action_id), 404)
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
        return ActionResult(False, say(TEXT, "not_approved", lang, reason=decision.text(lang)), 403)
    now = deps.clock()
    if not agent.hold(action.task_id):  # a crash after the approval leaves a lease that lapses
        return ActionResult(False, say(TEXT, "busy", lang, task=action.task_id), 409)
    if not deps.pending.approve(action.id, viewer.user, now):
        deps.tasks.release(action.task_id, deps.holder)
        fresh = deps.pending.get(action.id) or action
        why = "expired" if expired(fresh, now) else fresh.status
        return ActionResult(False, say(TEXT, "cannot_approve", lang, id=action.id, status=why), 409)
    _audit(agent, viewer, "approved", action_id, decision.reason, task_id=action.task_id, tool=action.tool)
    requester = agent.lang(
        deps.tasks.get(action.task_id)
    )  # the requester's conversation is told in its language
    after = deps.pending.get(action.id)
    if after is None or not after.released:
        deps.tasks.release(action.task_id, deps.holder)
    if after is not None and after.released:
        try:
            outcome = agent.resume(action.task_id, lang=requester)
        except BotError as exc:
            error = deps.redactor.text(exc.said(lang))
            return ActionResult(True, say(TEXT, "approved_resume_failed", lang, id=action.id, error=error))
        deps.notify(action.conversation, outcome.reply)
        return ActionResult(True, say(TEXT, "approved_ran", lang, id=action.id, reply=outcome.reply))
    deps.notify(
        action.conversation,
        say(TEXT, "approved_notice", requester, user=viewer.user, id=action.id),
    )
    return ActionResult(True, say(TEXT, "approved_waits", lang, id=action.id, user=action.user_id))


def reject(agent: Agent, viewer: Approver, action_id: int, lang: Lang = "en", note: str = "") -> ActionResult:
    """Refuse the action (nothing runs), recording who and `note` (the reason given); the task resumes
    to tell the model, the requester is told."""
    deps = agent.deps
    action = deps.pending.get(action_id)
    if action is None:
        return ActionResult(False, say(TEXT, "no_action", lang, id=action_id), 404)
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
        return ActionResult(False, say(TEXT, "not_allowed", lang, reason=decision.text(lang)), 403)
    if not deps.pending.close(action.id, "rejected", deps.clock(), by=viewer.user, note=note[:500]):
        return ActionResult(False, say(TEXT, "closed", lang, id=action.id, status=action.status), 409)
    _audit(agent, viewer, "rejected", action_id, decision.reason, task_id=action.task_id, tool=action.tool)
    requester = agent.lang(deps.tasks.get(action.task_id))
    try:
        outcome = agent.resume(action.task_id, lang=requester)
        tail = outcome.reply
    except BotError as exc:
        tail = say(TEXT, "resume_failed", requester, error=deps.redactor.text(exc.said(requester)))
    deps.notify(
        action.conversation,
        say(TEXT, "rejected_notice", requester, user=viewer.user, id=action.id, tail=tail),
    )
    return ActionResult(True, say(TEXT, "rejected", lang, id=action.id))
