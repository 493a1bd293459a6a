"""The chat commands that answer a pending action: /confirm, /cancel, /approve, /reject, /pending.

A risky call waits as a pending action bound to its user, conversation and exact arguments; these
commands release it, drop it (or stop a task), let an approver decide, and list what waits for whom.
`CONFIRM` also holds the session's own replies (unknown command, failed command).
"""

from __future__ import annotations

from xihe.agent import approvals, pending_view
from xihe.agent.audit import AuditEvent
from xihe.agent.cards import DIGEST_ARG, card_digest, digest_matches
from xihe.agent.commands import Command
from xihe.agent.crashpoint import crash_point
from xihe.agent.errors import TaskStateError
from xihe.agent.gate import Who
from xihe.agent.i18n import Catalog, Lang, say, say_md
from xihe.agent.inbound import CommandSession, Inbound, reply_lang
from xihe.agent.pending import LIVE, PendingAction, confirmable_here, expired, waiting
from xihe.agent.tasks import FINISHED, TaskStatus
from xihe.agent.timefmt import show


def _pick(session: CommandSession, who: Who, msg: Inbound, cmd: Command, verb: str) -> PendingAction | str:
    pending = session.deps.pending
    lang = reply_lang(session, msg)
    if cmd.args:
        if not cmd.args[0].isdigit():
            return say(CONFIRM, "not_numeric", lang, verb=verb, arg=repr(cmd.args[0]))
        action = pending.get(int(cmd.args[0]))
        if action is None:
            return say(CONFIRM, "no_action", lang, id=cmd.args[0])
        return action
    mine = pending.open_for(user_id=who.user, conversation=msg.conversation)
    if not mine:
        return say(CONFIRM, "nothing", lang, verb=verb)
    if len(mine) > 1:
        ids = ", ".join(str(p.id) for p in mine)
        return say(CONFIRM, "several", lang, verb=verb, ids=ids)
    return mine[0]


def _stale(action: PendingAction, cmd: Command, lang: Lang) -> str | None:
    """A card's click carries the digest of the arguments it showed (`/confirm 12 digest=<prefix>`):
    refuse it when the action's arguments are no longer those."""
    given = card_digest(cmd.args)
    if given is not None and not digest_matches(action, given):
        return say(CONFIRM, "stale", lang, id=action.id)
    return None


def confirm(session: CommandSession, who: Who, msg: Inbound, cmd: Command) -> str:
    deps = session.deps
    action = _pick(session, who, msg, cmd, "confirm")
    now = deps.clock()
    lang = reply_lang(session, msg)
    if isinstance(action, str):
        mine = deps.pending.open_for(user_id=who.user, conversation=msg.conversation, statuses=("confirmed",))
        confirmed = [a for a in mine if waiting(a) and not expired(a, now)]
        return _awaiting_approver(session, confirmed[0], lang) if confirmed and not cmd.args else action
    stale = _stale(action, cmd, lang)
    if stale is not None:
        return stale
    if (
        action.status == "confirmed"
        and waiting(action)
        and not expired(action, now)
        and action.user_id == who.user
    ):
        return _awaiting_approver(session, action, lang)  # a second yes: say who it waits for now
    if expired(action, now):
        deps.pending.expire(action.id, now)
        session.agent.resume(action.task_id)
        at = show(action.expires_at, deps.settings.core.timezone, seconds=False)
        return say(CONFIRM, "expired", lang, id=action.id, at=at)
    if not confirmable_here(action, who.user, msg.conversation):
        return say(CONFIRM, "not_here", lang, id=action.id)
    if not session.agent.hold(action.task_id):
        return say(CONFIRM, "busy", lang, id=action.id, task=action.task_id)
    if not deps.pending.confirm(action.id, who.user, action.conversation, now):
        deps.tasks.release(action.task_id, deps.holder)
        return say(CONFIRM, "again", lang, id=action.id, status=action.status)
    deps.audit.record(
        AuditEvent(
            at=now,
            kind="confirm",
            actor=who.user,
            outcome="confirmed",
            task_id=action.task_id,
            tool=action.tool,
            reason=action.reason,
            detail={"pending_id": action.id}
            if action.conversation == msg.conversation
            else {"pending_id": action.id, "asked_in": action.conversation},
        )
    )
    crash_point("after_confirm_update")
    return session.agent.resume(action.task_id).reply


def _awaiting_approver(session: CommandSession, action: PendingAction, lang: Lang) -> str:
    """Already confirmed by its requester; the names of those who may approve it."""
    names = pending_view.approvers_for(action, session.deps)
    who = say(CONFIRM, "or", lang).join(names) if names else say(CONFIRM, "no_approver", lang)
    return say(CONFIRM, "awaiting_approver", lang, id=action.id, approvers=who)


def _by_card(session: CommandSession, msg: Inbound, cmd: Command) -> str | None:
    """The refusal of an approver's card click whose digest no longer matches the action."""
    action = session.deps.pending.get(int(cmd.args[0]))
    return _stale(action, cmd, reply_lang(session, msg)) if action is not None else None


def approve(session: CommandSession, who: Who, msg: Inbound, cmd: Command) -> str:
    if not cmd.args or not cmd.args[0].isdigit():
        return say(CONFIRM, "id_usage", reply_lang(session, msg), verb="approve")
    stale = _by_card(session, msg, cmd)
    if stale is not None:
        return stale
    return approvals.approve(
        session.agent, approvals.Approver(who.user, msg.channel), int(cmd.args[0]), reply_lang(session, msg)
    ).message


def reject(session: CommandSession, who: Who, msg: Inbound, cmd: Command) -> str:
    if not cmd.args or not cmd.args[0].isdigit():
        return say(CONFIRM, "id_usage", reply_lang(session, msg), verb="reject")
    stale = _by_card(session, msg, cmd)
    if stale is not None:
        return stale
    note = " ".join(a for a in cmd.args[1:] if not a.startswith(DIGEST_ARG))  # `/reject 12 wrong date`
    approver = approvals.Approver(who.user, msg.channel)
    return approvals.reject(session.agent, approver, int(cmd.args[0]), reply_lang(session, msg), note).message


def cancel(session: CommandSession, who: Who, msg: Inbound, cmd: Command) -> str:
    deps = session.deps
    now = deps.clock()
    lang = reply_lang(session, msg)
    if cmd.args and cmd.args[0].lower() == "task":
        if len(cmd.args) < 2 or not cmd.args[1].isdigit():
            return say(CANCEL, "task_usage", lang)
        return _cancel_task(session, who, int(cmd.args[1]), lang)
    if cmd.args and cmd.args[0].isdigit():
        action = deps.pending.get(int(cmd.args[0]))
        if action is None or action.user_id != who.user:
            hint = ""
            try:  # the number may be a task of theirs: say how to cancel that instead of guessing
                task = deps.tasks.get(int(cmd.args[0]))
                if task.owner == who.user and task.status not in FINISHED:
                    hint = say(CANCEL, "task_hint", lang, id=task.id)
            except TaskStateError:
                pass
            return say(CANCEL, "no_action", lang, id=cmd.args[0]) + hint
        stale = _stale(action, cmd, lang)
        if stale is not None:
            return stale
    else:
        picked = _pick(session, who, msg, cmd, "cancel")
        if isinstance(picked, str):
            return picked
        action = picked
    if not deps.pending.close(action.id, "cancelled", now, by=who.user):
        return say(CANCEL, "action_closed", lang, id=action.id, status=action.status)
    deps.tasks.update(
        action.task_id,
        now,
        status=TaskStatus.CANCELLED,
        reply=say(CANCEL, "action_done", lang, id=action.id),
    )
    return say(CANCEL, "action_done", lang, id=action.id)


def _cancel_task(session: CommandSession, who: Who, task_id: int, lang: Lang) -> str:
    deps = session.deps
    try:
        task = deps.tasks.get(task_id)
    except TaskStateError:
        return say(CANCEL, "no_task", lang, id=task_id)
    if task.owner != who.user:
        return say(CANCEL, "not_your_task", lang, id=task.id)
    if task.status in FINISHED:
        return say(CANCEL, "task_finished", lang, id=task.id, status=task.status)
    now = deps.clock()
    for action in deps.pending.open_for(statuses=LIVE):
        if action.task_id == task.id:
            deps.pending.close(action.id, "cancelled", now, by=who.user)
    deps.tasks.update(task.id, now, status=TaskStatus.CANCELLED, reply=say(CANCEL, "by_owner", lang))
    return say(CANCEL, "task_done", lang, id=task.id)


CONFIRM: Catalog = {
    "unknown": {"en": "Unknown command /{name}. Try /help.", "zh": "没有 /{name} 这个命令。试试 /help。"},
    "did_you_mean": {
        "en": "Unknown command /{name}. Did you mean `/{guess}`? (/help lists them all)",
        "zh": "没有 /{name} 这个命令。你是不是想用 `/{guess}`？（/help 列出全部命令）",
    },
    "failed": {"en": "/{name} failed: {error}", "zh": "/{name} 失败：{error}"},
    "also_waiting": {
        "en": "Also waiting for your confirmation: {ids}; say which: /confirm ID.",
        "zh": "还有操作在等你确认：{ids}；请说明是哪个：/confirm 编号。",
    },
    "id_usage": {
        "en": "/{verb} needs the numeric action id, e.g. /{verb} 12.",
        "zh": "/{verb} 需要数字操作编号，例如 /{verb} 12。",
    },
    "not_numeric": {
        "en": "/{verb} takes a numeric action id, not {arg}.",
        "zh": "/{verb} 需要数字操作编号，而不是 {arg}。",
    },
    "no_action": {"en": "There is no pending action {id}.", "zh": "没有待处理的操作 {id}。"},
    "nothing": {
        "en": "Nothing is waiting for your /{verb} in this conversation.",
        "zh": "这个对话里没有等你 /{verb} 的操作。",
    },
    "several": {
        "en": "Several actions are waiting ({ids}); say which: /{verb} ID.",
        "zh": "有多个操作在等待（{ids}）；请说明是哪个：/{verb} 编号。",
    },
    "expired": {
        "en": "Action {id} expired at {at}; nothing was run.",
        "zh": "操作 {id} 已于 {at} 过期，没有执行任何操作。",
    },
    "not_here": {
        "en": "Action {id} is not waiting for your confirmation here.",
        "zh": "操作 {id} 不是在这里等你确认的。",
    },
    "busy": {
        "en": "Task {task} is being worked on elsewhere; try `/confirm {id}` again shortly.",
        "zh": "任务 {task} 正在别处处理，请稍后再 `/confirm {id}`。",
    },
    "awaiting_approver": {
        "en": "Action {id} is confirmed; waiting for {approvers} to `/approve {id}`.",
        "zh": "操作 {id} 你已确认；正在等待 {approvers} 发送 `/approve {id}` 批准。",
    },
    "or": {"en": " or ", "zh": " 或 "},
    "no_approver": {"en": "an approver (none is configured)", "zh": "审批人（尚未配置审批人）"},
    "stale": {
        "en": "Action {id} no longer has the arguments this card showed; nothing was run.",
        "zh": "操作 {id} 的参数已不是卡片上显示的那些，没有执行任何操作。",
    },
    "again": {
        "en": "Action {id} is {status}; it cannot be confirmed again.",
        "zh": "操作 {id} 已是 {status} 状态，不能再次确认。",
    },
}

CANCEL: Catalog = {
    "task_usage": {"en": "Say which task: /cancel task 7.", "zh": "请说明是哪个任务：/cancel task 7。"},
    "no_action": {
        "en": "There is no waiting action {id} of yours.",
        "zh": "没有属于你、正在等待的操作 {id}。",
    },
    "task_hint": {
        "en": " Task {id} is yours: `/cancel task {id}` stops it.",
        "zh": " 任务 {id} 是你的：要停止它请发 `/cancel task {id}`。",
    },
    "action_closed": {"en": "Action {id} is {status}.", "zh": "操作 {id} 已是 {status} 状态。"},
    "action_done": {
        "en": "Cancelled action {id}; nothing was run.",
        "zh": "已取消操作 {id}，什么都没有执行。",
    },
    "no_task": {"en": "There is no task {id}.", "zh": "没有任务 {id}。"},
    "not_your_task": {"en": "Task {id} is not yours to cancel.", "zh": "任务 {id} 不是你的，不能取消。"},
    "task_finished": {"en": "Task {id} is already {status}.", "zh": "任务 {id} 已经是 {status} 状态。"},
    "task_done": {"en": "Task {id} cancelled.", "zh": "任务 {id} 已取消。"},
    "by_owner": {"en": "Cancelled by its owner.", "zh": "已被创建者取消。"},
}

PENDING: Catalog = {
    "none": {"en": "Nothing is waiting.", "zh": "没有等待中的操作。"},
    "head": {"en": "Waiting:", "zh": "等待中："},
    "line": {
        "en": "- #{id} {summary} — asked by {user}; waiting for {waiting}; expires {expires}",
        "zh": "- #{id} {summary} —— {user} 发起；等待：{waiting}；{expires} 过期",
    },
    "approve": {"en": "  you may release it: `/approve {id}`", "zh": "  你可以批准：`/approve {id}`"},
}


def pending(session: CommandSession, who: Who, msg: Inbound, cmd: Command) -> str:
    """What waits for whom: your own actions, and everyone's for approvers."""
    deps = session.deps
    lang = reply_lang(session, msg)
    access = deps.settings.access
    approver = any(r in access.roles and access.roles[r].approver for r in who.roles)
    now = deps.clock()
    live = [p for p in deps.pending.open_for(statuses=LIVE) if not expired(p, now)]
    shown = [p for p in live if approver or p.user_id == who.user]
    if not shown:
        return say_md(PENDING, "none", lang)
    lines: list[str] = [say_md(PENDING, "head", lang)]
    tz = deps.settings.core.timezone
    for p in shown:
        v = pending_view.view(p, deps, session.agent.registry, lang)
        lines.append(
            say_md(
                PENDING,
                "line",
                lang,
                id=p.id,
                summary=v.summary,
                user=p.user_id,
                waiting=v.waiting_for,
                expires=show(p.expires_at, tz, date=False),
            )
        )
        if who.user in v.approvers and p.approved_by is None:
            lines.append(say_md(PENDING, "approve", lang, id=p.id))
    return "\n".join(lines)
