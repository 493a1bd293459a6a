"""Confirmation of a risky call: the task pauses on a pending action and goes on once it is released.

The gate says `Confirm`; `settle` then finds (or writes) the pending action bound to this attempt
and returns what the walk does next:

    the action is ...                         →  result
    new, or still waiting for a yes/approver  →  Pause    the task waits; `ask` tells the user how to answer
    expired (now or earlier), cancelled,      →  Refusal  nothing runs; the model is told why
      rejected
    released (confirmed, approved if needed)  →  Release  consumed once, for these exact arguments
    executed (consumed by this attempt)       →  Release  the process stopped before the attempt's row

Expiry is `xihe.agent.pending.expired`, the one rule every reader of pending actions uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from xihe.agent.audit import AuditEvent
from xihe.agent.canonical import args_digest, canonical_json
from xihe.agent.deps import Deps
from xihe.agent.errors import ToolError
from xihe.agent.frontier import UNCERTAIN
from xihe.agent.gate import Confirm
from xihe.agent.i18n import Catalog, Lang, Text, say_md, text
from xihe.agent.pending import PendingAction, expired
from xihe.agent.pending_view import approvers_for
from xihe.agent.registry import ParsedCall
from xihe.agent.tasks import Task, TaskStatus
from xihe.agent.user_text import outcome, readable_args
from xihe.agent.wecom_markdown import Md, inline

ASK: Catalog = {
    "reply": {
        "en": "Reply `/confirm {id}` (or 确认执行) within {ttl} minutes to run it, or `/cancel {id}`.",
        "zh": "请在 {ttl} 分钟内回复 `/confirm {id}`（或“确认执行”）来执行，或回复 `/cancel {id}` 取消。",
    },
    "approver": {
        "en": "Confirmed by you; waiting for an approver: someone with the approver role sends "
        "`/approve {id}` ({approvers}).",
        "zh": "你已确认；正在等待审批：审批人（{approvers}）发送 `/approve {id}` 后执行。",
    },
    "why": {"en": "⚠️ {reason}.", "zh": "⚠️ {reason}。"},
    "interrupted": {
        "en": "⚠️ Task {task}: `{tool}` {args} was interrupted ({why}).\n{meaning}It may or may not have happened, "
        "and it was NOT run again. Please check; reply `/confirm {id}` within {ttl} minutes to run it again "
        "with the same arguments, or `/cancel {id}`.",
        "zh": "⚠️ 任务 {task}：`{tool}` {args} 被中断了（{why}）。\n{meaning}它可能已经发生，也可能没有，而且没有再次执行。"
        "请检查一下；在 {ttl} 分钟内回复 `/confirm {id}` 用同样的参数再执行一次，或回复 `/cancel {id}`。",
    },
}
CLOSED_TEXT: Catalog = {  # why a call did not run after its confirmation was closed (English: the model's)
    "closed": {
        "en": "the confirmation was {status}; tell the user nothing was done.",
        "zh": "确认{status}，什么都没有执行。",
    },
    "closed_unsure": {
        "en": "the confirmation was {status}. An earlier attempt was interrupted and may or may not have "
        "taken effect; tell the user the outcome is unknown.",
        "zh": "确认{status}。之前的一次尝试被中断了，可能已经生效也可能没有：结果未知。",
    },
    "expired": {"en": "expired", "zh": "已过期"},
    "cancelled": {"en": "cancelled", "zh": "已取消"},
    "rejected": {"en": "rejected", "zh": "被驳回"},
}

CLOSED = ("expired", "cancelled", "rejected")  # an answer that runs nothing


@dataclass(frozen=True)
class Release:
    """The confirmation is spent on this attempt: run the call."""


@dataclass(frozen=True)
class Refusal:
    """The confirmation was closed (`kind`: expired, cancelled, rejected); `message` is for the model,
    `said` the same for people."""

    kind: str
    message: str
    said: Text | None = None


@dataclass(frozen=True)
class Pause:
    """The task waits for pending action `pending_id`; `ask` is what the user reads."""

    pending_id: int
    ask: str


def settle(
    deps: Deps,
    task: Task,
    key: str,
    call: ParsedCall,
    decision: Confirm,
    environment: str,
    lang: Lang,
    *,
    bound: str,
    unsure: str | None = None,
) -> Release | Refusal | Pause:
    """What the walk does with a call the gate wants confirmed (see the table above).

    `bound`: the pending-action key of this attempt (`xihe.agent.frontier.confirmation_key`);
    `unsure`: why an earlier attempt may or may not have taken effect (then the yes is to run it again).
    """
    now = deps.clock()
    digest = args_digest(call.spec.name, call.data)
    pending = deps.pending.for_step(task.id, bound)
    if pending is None:
        pending = deps.pending.create(
            task_id=task.id,
            step_key=bound,
            user_id=task.owner,
            conversation=task.conversation,
            tool=call.spec.name,
            args_json=canonical_json(call.data),
            args_digest=digest,
            environment=environment,
            reason=decision.reason,
            needs_approval=decision.needs_approval,
            now=now,
            expires_at=now + timedelta(minutes=deps.settings.core.confirm.ttl_minutes),
        )
        audit_gate(deps, task, key, call, "confirm", decision.reason, environment, pending_id=pending.id)
    if expired(pending, now):
        deps.pending.expire(pending.id, now)
        pending = deps.pending.get(pending.id) or pending
    if pending.status in CLOSED:
        status = text(CLOSED_TEXT, pending.status)
        why = text(CLOSED_TEXT, "closed_unsure" if unsure else "closed", status=status)
        prefix = "NOT RUN AGAIN" if unsure else "NOT EXECUTED"
        return Refusal(pending.status, f"{prefix}: {why}", outcome(prefix, why))
    if pending.status == "executed":
        return Release()  # consumed, then the process stopped before this attempt's `running` row
    if pending.released and deps.pending.consume(pending.id, digest, now):
        return Release()
    ask = prompt(deps, task, call, decision, pending, lang, unsure=unsure)
    deps.tasks.update(task.id, now, status=TaskStatus.AWAITING_CONFIRMATION, current_step=key, reply=ask)
    return Pause(pending.id, ask)


def prompt(
    deps: Deps,
    task: Task,
    call: ParsedCall,
    decision: Confirm,
    pending: PendingAction,
    lang: Lang,
    *,
    unsure: str | None = None,
) -> str:
    """What the user reads while the task waits: the call, what it means, and how to answer."""
    # the arguments and what they resolve to are outside text (the model's, DolphinScheduler's)
    args_text = "— " + inline(
        readable_args(deps.redactor.data(call.data, call.spec.secret_args)).replace("\n", " · ")
    )
    try:  # what the arguments resolve to (e.g. which workflow, which dates), so the yes is informed
        meaning = call.spec.explain(call.subject, deps, lang) if call.spec.explain is not None else ""
    except ToolError:
        meaning = ""
    meaning = f"→ {inline(deps.redactor.text(meaning))}\n" if meaning else ""
    minutes = deps.settings.core.confirm.ttl_minutes
    if pending.needs_approval and pending.status == "confirmed":
        names = ", ".join(approvers_for(pending, deps)) or "-"
        return say_md(ASK, "approver", lang, id=pending.id, approvers=names)
    if unsure:
        why = deps.redactor.text(unsure.removeprefix(UNCERTAIN).split(";")[0].strip())
        return say_md(
            ASK,
            "interrupted",
            lang,
            task=task.id,
            tool=call.spec.name,
            args=Md(args_text),
            why=why,
            meaning=Md(meaning),
            id=pending.id,
            ttl=minutes,
        )
    why = say_md(ASK, "why", lang, reason=decision.text(lang))
    return f"{why}\n`{call.spec.name}` {args_text}\n{meaning}" + say_md(
        ASK, "reply", lang, id=pending.id, ttl=minutes
    )


def audit_gate(
    deps: Deps,
    task: Task,
    key: str,
    call: ParsedCall,
    outcome: str,
    reason: str,
    environment: str,
    pending_id: int | None = None,
) -> None:
    """Count and audit a gate decision that stops a call (deny) or holds it (confirm)."""
    deps.metrics.gate.labels(outcome).inc()
    deps.audit.record(
        AuditEvent(
            at=deps.clock(),
            kind="gate",
            actor=task.owner,
            outcome=outcome,
            task_id=task.id,
            step_key=key,
            intent=task.goal,
            tool=call.spec.name,
            args_redacted=deps.redactor.data(call.data, call.spec.secret_args),
            reason=reason,
            detail={"environment": environment, "pending_id": pending_id},
        )
    )
