"""A conversation turn: identity from the channel, commands without the model, the rest to the loop.

Every channel (terminal, WeCom app, WeCom AI bot, HTTP API) calls `Session.handle(Inbound)`. Command
handlers live in a table that later features extend (`/run`, `/maint`, `/sh` ...).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from agent import approvals
from agent.audit import AuditEvent
from agent.commands import Command, CommandSyntaxError, parse
from agent.crashpoint import crash_point
from agent.errors import BotError, TaskStateError
from agent.gate import Who, identify, visible
from agent.loop import Agent, Outcome
from agent.pending import PendingAction
from agent.timefmt import show


@dataclass(frozen=True)
class Inbound:
    """One message as a channel verified it."""

    user: str
    conversation: str
    text: str
    channel: str = "cli"


Handler = Callable[["Session", Who, Inbound, Command], str]

HELP_COMMANDS = [
    ("/help", "what you may do here"),
    ("/confirm [id]", "run the action waiting for your confirmation (also: 确认执行)"),
    ("/cancel [id]", "drop a waiting action or stop a task"),
    ("/approve ID · /reject ID", "approvers: release or refuse someone's production write"),
    ("/tasks", "your recent tasks"),
    ("/task ID", "a task's steps: what ran, with what input, how long, what failed"),
]


class Session:
    """Routes inbound messages to commands or the agent loop."""

    def __init__(
        self,
        agent: Agent,
        commands: dict[str, Handler] | None = None,
        help_lines: list[tuple[str, str]] | None = None,
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
            "task": _task,
            **(commands or {}),
        }
        self.help_lines = HELP_COMMANDS + (help_lines or [])
        # commands whose arguments may hold secrets: their handler records them itself, redacted
        self.private_commands: set[str] = set()

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
            done = {str(o.task_id) for o in resumed}
            picked = _pick(self, who, msg, command, "confirm")
            if isinstance(picked, str) or str(picked.task_id) in done:
                return ""  # that /confirm was for the task just resumed
        if command is None:
            return self.agent.start(who, msg.conversation, msg.text, channel=msg.channel).reply
        handler = self.commands.get(command.name)
        if handler is None:
            return f"Unknown command /{command.name}. Try /help."
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
            return f"/{command.name} failed: {self.deps.redactor.text(str(exc))}"

    def run_tool(self, who: Who, msg: Inbound, tool: str, args: dict[str, object]) -> Outcome:
        """An explicit command that maps to a tool: same registry, gate, executor and audit."""
        return self.agent.start_command(
            who, msg.conversation, msg.text, tool, dict(args), channel=msg.channel
        )


def _pick(session: Session, who: Who, msg: Inbound, cmd: Command, verb: str) -> PendingAction | str:
    pending = session.deps.pending
    if cmd.args:
        if not cmd.args[0].isdigit():
            return f"/{verb} takes a numeric action id, not {cmd.args[0]!r}."
        action = pending.get(int(cmd.args[0]))
        if action is None:
            return f"There is no pending action {cmd.args[0]}."
        return action
    mine = pending.open_for(user_id=who.user, conversation=msg.conversation)
    if not mine:
        return f"Nothing is waiting for your /{verb} in this conversation."
    if len(mine) > 1:
        ids = ", ".join(str(p.id) for p in mine)
        return f"Several actions are waiting ({ids}); say which: /{verb} ID."
    return mine[0]


def _help(session: Session, who: Who, msg: Inbound, cmd: Command) -> str:
    access = session.deps.settings.access
    tools = [
        s
        for s in session.agent.registry.specs.values()
        if visible(s.name, s.risk, s.environments or (("*",) if s.environment_of else ()), who, access)
    ]
    lines = [f"**xihe** — you are `{who.user}` ({', '.join(who.roles) or 'no roles'})", "", "Commands:"]
    lines += [f"- `{c}` {d}" for c, d in session.help_lines]
    lines += ["", "Tools you may ask me to use:" if tools else "You may not use any tools."]
    lines += [
        f"- `{s.name}` ({s.risk}) {s.description.splitlines()[0]}"
        for s in sorted(tools, key=lambda s: s.name)
    ]
    return "\n".join(lines)


def _confirm(session: Session, who: Who, msg: Inbound, cmd: Command) -> str:
    deps = session.deps
    action = _pick(session, who, msg, cmd, "confirm")
    if isinstance(action, str):
        return action
    now = deps.clock()
    if action.status == "pending" and action.expires_at <= now:
        deps.pending.close(action.id, "expired", now)
        session.agent.resume(action.task_id)
        expired = show(action.expires_at, deps.settings.core.timezone, seconds=False)
        return f"Action {action.id} expired at {expired}; nothing was run."
    if action.user_id != who.user or action.conversation != msg.conversation:
        return f"Action {action.id} is not waiting for your confirmation here."
    if not session.agent.hold(action.task_id):
        return (
            f"Task {action.task_id} is being worked on elsewhere; try `/confirm {action.id}` again shortly."
        )
    if not deps.pending.confirm(action.id, who.user, msg.conversation, now):
        deps.tasks.release(action.task_id, deps.holder)
        return f"Action {action.id} is {action.status}; it cannot be confirmed again."
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
        return "/approve needs the numeric action id, e.g. /approve 12."
    return approvals.approve(
        session.agent, approvals.Approver(who.user, msg.channel), int(cmd.args[0])
    ).message


def _reject(session: Session, who: Who, msg: Inbound, cmd: Command) -> str:
    if not cmd.args or not cmd.args[0].isdigit():
        return "/reject needs the numeric action id, e.g. /reject 12."
    return approvals.reject(
        session.agent, approvals.Approver(who.user, msg.channel), int(cmd.args[0])
    ).message


def _cancel(session: Session, who: Who, msg: Inbound, cmd: Command) -> str:
    deps = session.deps
    now = deps.clock()
    if cmd.args and cmd.args[0].isdigit():
        action = deps.pending.get(int(cmd.args[0]))
        if action is None or action.user_id != who.user:
            try:
                task = deps.tasks.get(int(cmd.args[0]))
            except TaskStateError:
                return f"Nothing numbered {cmd.args[0]} is yours to cancel."
            if task.owner != who.user or task.status in ("done", "failed", "cancelled"):
                return (
                    f"Task {task.id} is {task.status} and not yours to cancel."
                    if task.owner != who.user
                    else f"Task {task.id} is already {task.status}."
                )
            deps.tasks.update(task.id, now, status="cancelled", reply="Cancelled by its owner.")
            return f"Task {task.id} cancelled."
    else:
        picked = _pick(session, who, msg, cmd, "cancel")
        if isinstance(picked, str):
            return picked
        action = picked
    if not deps.pending.close(action.id, "cancelled", now, by=who.user):
        return f"Action {action.id} is {action.status}."
    deps.tasks.update(
        action.task_id, now, status="cancelled", reply=f"Action {action.id} cancelled; nothing was run."
    )
    return f"Cancelled action {action.id}; nothing was run."


def _tasks(session: Session, who: Who, msg: Inbound, cmd: Command) -> str:
    tasks = session.deps.tasks.recent(owner=who.user, limit=10)
    if not tasks:
        return "You have no tasks yet."
    return "\n".join(f"- #{t.id} {t.status} {t.kind}: {t.goal[:60]}" for t in tasks)


def _task(session: Session, who: Who, msg: Inbound, cmd: Command) -> str:
    from agent.report import task_report

    if not cmd.args or not cmd.args[0].isdigit():
        return "/task needs a task id, e.g. /task 12."
    task = session.deps.tasks.get(int(cmd.args[0]))
    if task.owner != who.user and not any(
        session.deps.settings.access.roles.get(r, None) and session.deps.settings.access.roles[r].approver
        for r in who.roles
    ):
        return f"Task {task.id} belongs to someone else."
    return task_report(session.deps, task.id)
