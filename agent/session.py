"""A conversation turn: identity from the channel, commands without the model, the rest to the loop.

Every channel (terminal, WeCom app, WeCom AI bot, HTTP API) calls `Session.handle(Inbound)`. Command
handlers live in a table that later features extend (`/run`, `/maint`, `/sh` ...).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from xihe.agent import approvals, pending_view
from xihe.agent.audit import AuditEvent
from xihe.agent.commands import Command, CommandSyntaxError, parse
from xihe.agent.crashpoint import crash_point
from xihe.agent.errors import BotError, TaskStateError
from xihe.agent.gate import Who, identify
from xihe.agent.help import HelpEntry, entry
from xihe.agent.help import render as render_help
from xihe.agent.i18n import Catalog, Lang, say
from xihe.agent.loop import Agent, Outcome
from xihe.agent.pending import LIVE, PendingAction, expired
from xihe.agent.tasks import FINISHED, TaskStatus
from xihe.agent.timefmt import show


@dataclass(frozen=True)
class Inbound:
    """One message as a channel verified it."""

    user: str
    conversation: str
    text: str
    channel: str = "cli"


Handler = Callable[["Session", Who, Inbound, Command], str]

HELP_COMMANDS = [
    HelpEntry("/help [CMD]", "what you may do here; `/help CMD` explains one command", "/help confirm",
              "你能做什么；`/help 命令` 看某个命令的说明"),
    HelpEntry("/confirm [ID]", "run the action waiting for your confirmation (also: 确认执行)", "/confirm 12",
              "执行等你确认的操作（也可以说：确认执行）",
              detail="An action is bound to you, this conversation and its exact arguments, and expires.",
              detail_zh="确认只对你本人、本会话和这组参数有效，并且会过期。"),
    HelpEntry("/cancel [ID] · /cancel task N", "drop a waiting action, or stop one of your tasks", "/cancel 12",
              "取消等待中的操作，或停止你的某个任务",
              detail="`/cancel ID` always means action ID (the number in `/confirm ID`); `/cancel task N` stops task N.",
              detail_zh="`/cancel ID` 指操作编号（即 `/confirm ID` 里的编号）；`/cancel task N` 停止任务 N。"),
    HelpEntry("/pending", "what is waiting for whom (approvers see everyone's)", "/pending",
              "有哪些操作在等谁（审批人能看到所有人的）"),
    HelpEntry("/approve ID · /reject ID", "release or refuse someone's production write", "/approve 12",
              "批准或拒绝别人的生产环境写操作", needs="approver"),
    HelpEntry("/tasks", "your recent tasks", "/tasks", "你最近的任务"),
    HelpEntry("/task ID", "a task's steps: what ran, with what input, how long, what failed", "/task 7",
              "任务的每一步：做了什么、输入、耗时、哪里失败"),
]  # fmt: skip


class Session:
    """Routes inbound messages to commands or the agent loop."""

    def __init__(
        self,
        agent: Agent,
        commands: dict[str, Handler] | None = None,
        help_lines: Iterable[HelpEntry | tuple[str, str]] = (),
        *,
        private_commands: Iterable[str] = (),
        status_lines: Iterable[Callable[[], str]] = (),
    ) -> None:
        self.agent = agent
        self.deps = agent.deps
        self.commands: dict[str, Handler] = {
            "help": _help,
            "confirm": _confirm,
            "cancel": _cancel,
            "approve": _approve,
            "reject": _reject,
            "tasks": _tasks,
            "pending": _pending,
            "task": _task,
            **(commands or {}),
        }
        self.help_lines: list[HelpEntry | tuple[str, str]] = [*HELP_COMMANDS, *help_lines]
        # commands whose arguments may hold secrets: their handler records them itself, redacted
        self.private_commands: frozenset[str] = frozenset(private_commands)
        # live status shown under /help (e.g. the shell sandbox), read when /help is asked
        self.status_lines: tuple[Callable[[], str], ...] = tuple(status_lines)

    def handle(self, msg: Inbound) -> str:
        """The reply to one inbound message (progress and late results go through deps.notify).

        A task of this conversation that was confirmed but never resumed (its process died in
        between) is resumed first; its reply comes before this message's.
        """
        resumed = self.agent.resume_stalled(msg.conversation)
        reply = self._handle(msg, resumed)
        return "\n\n".join([*(o.reply for o in resumed), *([reply] if reply else [])])

    def _handle(self, msg: Inbound, resumed: list[Outcome]) -> str:
        who = identify(msg.user, self.deps.settings.access)
        phrases = tuple(self.deps.settings.core.confirm.phrases)
        try:
            command = parse(msg.text, phrases)
        except CommandSyntaxError as exc:
            return str(exc)
        if command is not None and command.name == "confirm" and resumed:
            answer = self._after_resume(who, msg, command, resumed)
            if answer is not None:
                return answer
        if command is None:
            return self.agent.start(who, msg.conversation, msg.text, channel=msg.channel).reply
        handler = self.commands.get(command.name)
        if handler is None:
            return say(CONFIRM, "unknown", reply_lang(self, msg), name=command.name)
        self.deps.audit.record(
            AuditEvent(
                at=self.deps.clock(),
                kind="command",
                actor=who.user,
                outcome="received",
                intent=f"/{command.name} (arguments recorded by the command)"
                if command.name in self.private_commands
                else self.deps.redactor.text(msg.text),
                tool=f"/{command.name}",
            )
        )
        try:
            return handler(self, who, msg, command)
        except BotError as exc:
            lang = reply_lang(self, msg)
            error = self.deps.redactor.text(exc.said(lang))
            return say(CONFIRM, "failed", lang, name=command.name, error=error)

    def _after_resume(self, who: Who, msg: Inbound, command: Command, resumed: list[Outcome]) -> str | None:
        """A /confirm that may have been meant for the task just resumed: never confirm something else by it."""
        pending = self.deps.pending
        if not command.args:
            others = pending.open_for(user_id=who.user, conversation=msg.conversation)
            ids = ", ".join(str(p.id) for p in others)
            return say(CONFIRM, "also_waiting", reply_lang(self, msg), ids=ids) if others else ""
        action = pending.get(int(command.args[0])) if command.args[0].isdigit() else None
        return "" if action is not None and action.task_id in {o.task_id for o in resumed} else None

    def run_tool(self, who: Who, msg: Inbound, tool: str, args: dict[str, object]) -> Outcome:
        """An explicit command that maps to a tool: same registry, gate, executor and audit."""
        return self.agent.start_command(
            who, msg.conversation, msg.text, tool, dict(args), channel=msg.channel
        )


def _pick(session: Session, who: Who, msg: Inbound, cmd: Command, verb: str) -> PendingAction | str:
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


def reply_lang(session: Session, msg: Inbound) -> Lang:
    """The language of this message, else of the user's last free-text message here, else the configured one."""
    return session.deps.lang(msg.text, msg.conversation)


def _help(session: Session, who: Who, msg: Inbound, cmd: Command) -> str:
    entries = [entry(e) for e in session.help_lines]
    topic = cmd.args[0] if cmd.args else ""
    text = render_help(
        entries,
        who,
        session.deps.settings.access,
        session.agent.registry.specs,
        reply_lang(session, msg),
        topic,
    )
    return text + "".join("\n\n" + line() for line in session.status_lines)


def _confirm(session: Session, who: Who, msg: Inbound, cmd: Command) -> str:
    deps = session.deps
    action = _pick(session, who, msg, cmd, "confirm")
    if isinstance(action, str):
        return action
    now = deps.clock()
    lang = reply_lang(session, msg)
    if expired(action, now):
        deps.pending.expire(action.id, now)
        session.agent.resume(action.task_id)
        at = show(action.expires_at, deps.settings.core.timezone, seconds=False)
        return say(CONFIRM, "expired", lang, id=action.id, at=at)
    if action.user_id != who.user or action.conversation != msg.conversation:
        return say(CONFIRM, "not_here", lang, id=action.id)
    if not session.agent.hold(action.task_id):
        return say(CONFIRM, "busy", lang, id=action.id, task=action.task_id)
    if not deps.pending.confirm(action.id, who.user, msg.conversation, now):
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
            detail={"pending_id": action.id},
        )
    )
    crash_point("after_confirm_update")
    return session.agent.resume(action.task_id).reply


def _approve(session: Session, who: Who, msg: Inbound, cmd: Command) -> str:
    if not cmd.args or not cmd.args[0].isdigit():
        return say(CONFIRM, "id_usage", reply_lang(session, msg), verb="approve")
    return approvals.approve(
        session.agent, approvals.Approver(who.user, msg.channel), int(cmd.args[0]), reply_lang(session, msg)
    ).message


def _reject(session: Session, who: Who, msg: Inbound, cmd: Command) -> str:
    if not cmd.args or not cmd.args[0].isdigit():
        return say(CONFIRM, "id_usage", reply_lang(session, msg), verb="reject")
    return approvals.reject(
        session.agent, approvals.Approver(who.user, msg.channel), int(cmd.args[0]), reply_lang(session, msg)
    ).message


def _cancel(session: Session, who: Who, msg: Inbound, cmd: Command) -> str:
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


def _cancel_task(session: Session, who: Who, task_id: int, lang: Lang) -> str:
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


def _pending(session: Session, who: Who, msg: Inbound, cmd: Command) -> str:
    """What waits for whom: your own actions, and everyone's for approvers."""
    deps = session.deps
    lang = reply_lang(session, msg)
    access = deps.settings.access
    approver = any(r in access.roles and access.roles[r].approver for r in who.roles)
    now = deps.clock()
    live = [p for p in deps.pending.open_for(statuses=LIVE) if not expired(p, now)]
    shown = [p for p in live if approver or p.user_id == who.user]
    if not shown:
        return say(PENDING, "none", lang)
    lines = [say(PENDING, "head", lang)]
    tz = deps.settings.core.timezone
    for p in shown:
        v = pending_view.view(p, deps, session.agent.registry, lang)
        lines.append(
            say(
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
            lines.append(say(PENDING, "approve", lang, id=p.id))
    return "\n".join(lines)


def _tasks(session: Session, who: Who, msg: Inbound, cmd: Command) -> str:
    from xihe.agent.report import task_lines

    tasks = session.deps.tasks.recent(owner=who.user, limit=10)
    return task_lines(tasks, reply_lang(session, msg))


TASK: Catalog = {
    "usage": {"en": "/task needs a task id, e.g. /task 12.", "zh": "/task 需要任务编号，例如 /task 12。"},
    "not_yours": {"en": "Task {id} belongs to someone else.", "zh": "任务 {id} 属于别人。"},
    "missing": {"en": "There is no task {id}.", "zh": "没有任务 {id}。"},
}


def _task(session: Session, who: Who, msg: Inbound, cmd: Command) -> str:
    from xihe.agent.report import task_report

    lang = reply_lang(session, msg)
    if not cmd.args or not cmd.args[0].isdigit():
        return say(TASK, "usage", lang)
    try:
        task = session.deps.tasks.get(int(cmd.args[0]))
    except TaskStateError:
        return say(TASK, "missing", lang, id=cmd.args[0])
    if task.owner != who.user and not any(
        session.deps.settings.access.roles.get(r, None) and session.deps.settings.access.roles[r].approver
        for r in who.roles
    ):
        return say(TASK, "not_yours", lang, id=task.id)
    return task_report(session.deps, task.id, lang)
