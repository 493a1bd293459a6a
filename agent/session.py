"""A conversation turn: identity from the channel, commands without the model, the rest to the loop.

Every channel (terminal, WeCom app, WeCom AI bot, HTTP API) calls `Session.handle(Inbound)`. Command
handlers live in a table that later features extend (`/run`, `/maint`, `/sh` ...); the built-in ones
are `/help` (here), the pending-action commands (`agent.action_commands`) and the task commands
(`agent.task_commands`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from xihe.agent import action_commands, policy, task_commands
from xihe.agent.action_commands import CONFIRM
from xihe.agent.audit import AuditEvent
from xihe.agent.commands import Command, CommandSyntaxError, parse
from xihe.agent.errors import BotError
from xihe.agent.gate import Who, identify
from xihe.agent.help import HelpEntry, entry
from xihe.agent.help import render as render_help
from xihe.agent.i18n import Lang, said_md, say_md
from xihe.agent.inbound import Inbound, reply_lang
from xihe.agent.loop import Agent, Outcome
from xihe.agent.wecom_markdown import Md, block

Handler = Callable[["Session", Who, Inbound, Command], str]
GUESS = 70.0  # how close (rapidfuzz ratio) a mistyped command must be to a real one: /stauts → /status

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
    HelpEntry("/policy USER · /policy TOOL [ENV]", "what a user may do, where and with whose approval; or who "
              "may use a tool", "/policy alice", "某个用户能做什么、在哪里、要谁批准；或谁能用某个工具",
              needs="admin", detail="The answer is the gate's own decision over the loaded access.yaml.",
              detail_zh="答案就是门禁按当前 access.yaml 做出的判定。"),
    HelpEntry("/resume ID", "continue your task that stopped (e.g. the model was down)", "/resume 7",
              "继续你停下的任务（例如模型暂时不可用时）"),
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
        status_lines: Iterable[Callable[[Lang], str]] = (),
    ) -> None:
        self.agent = agent
        self.deps = agent.deps
        self.commands: dict[str, Handler] = {
            "help": _help,
            "confirm": action_commands.confirm,
            "cancel": action_commands.cancel,
            "approve": action_commands.approve,
            "reject": action_commands.reject,
            "tasks": task_commands.list_tasks,
            "pending": action_commands.pending,
            "task": task_commands.show_task,
            "policy": policy.command,
            "resume": task_commands.resume_task,
            **(commands or {}),
        }
        self.help_lines: list[HelpEntry | tuple[str, str]] = [*HELP_COMMANDS, *help_lines]
        # commands whose arguments may hold secrets: their handler records them itself, redacted
        self.private_commands: frozenset[str] = frozenset(private_commands)
        # live status shown under /help (e.g. the shell sandbox), read when /help is asked
        self.status_lines: tuple[Callable[[Lang], str], ...] = tuple(status_lines)

    def handle(self, msg: Inbound) -> str:
        """The reply to one inbound message (progress and late results go through deps.notify).

        A task of this conversation that was confirmed but never resumed (its process died in
        between) is resumed first; its reply comes before this message's.
        """
        resumed = self.agent.resume_stalled(msg.conversation)
        reply = self._handle(replace(msg, lang=reply_lang(self, msg)), resumed)
        return "\n\n".join([*(o.reply for o in resumed), *([reply] if reply else [])])

    def _handle(self, msg: Inbound, resumed: list[Outcome]) -> str:
        """`msg` with its language derived; its sender is identified here, once."""
        who = identify(msg.user, self.deps.settings.access)
        phrases = tuple(self.deps.settings.core.confirm.phrases)
        try:
            command = parse(msg.text, phrases)
        except CommandSyntaxError as exc:
            return block(str(exc))  # it quotes what the user typed
        if command is not None and command.name == "confirm" and resumed:
            answer = self._after_resume(who, msg, command, resumed)
            if answer is not None:
                return answer
        if command is None:
            return self.agent.start(who, msg.conversation, msg.text, channel=msg.channel, lang=msg.lang).reply
        handler = self.commands.get(command.name)
        if handler is None:
            lang = reply_lang(self, msg)
            from rapidfuzz import fuzz, process  # only a mistyped command needs it

            guess = process.extractOne(
                command.name, list(self.commands), scorer=fuzz.ratio, score_cutoff=GUESS
            )
            if guess is None:
                return say_md(CONFIRM, "unknown", lang, name=command.name)
            return say_md(CONFIRM, "did_you_mean", lang, name=command.name, guess=guess[0])
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
            error = Md(self.deps.redactor.text(said_md(exc.text or str(exc), lang)))
            return say_md(CONFIRM, "failed", lang, name=command.name, error=error)

    def _after_resume(self, who: Who, msg: Inbound, command: Command, resumed: list[Outcome]) -> str | None:
        """A /confirm that may have been meant for the task just resumed: never confirm something else by it."""
        pending = self.deps.pending
        if not command.args:
            others = pending.open_for(user_id=who.user, conversation=msg.conversation)
            ids = ", ".join(str(p.id) for p in others)
            return say_md(CONFIRM, "also_waiting", reply_lang(self, msg), ids=ids) if others else ""
        action = pending.get(int(command.args[0])) if command.args[0].isdigit() else None
        return "" if action is not None and action.task_id in {o.task_id for o in resumed} else None

    def run_tool(self, who: Who, msg: Inbound, tool: str, args: dict[str, object]) -> Outcome:
        """An explicit command that maps to a tool: same registry, gate, executor and audit."""
        return self.agent.start_command(
            who, msg.conversation, msg.text, tool, dict(args), channel=msg.channel, lang=msg.lang
        )


def _help(session: Session, who: Who, msg: Inbound, cmd: Command) -> str:
    entries = [entry(e) for e in session.help_lines]
    topic = cmd.args[0] if cmd.args else ""
    lang = reply_lang(session, msg)
    text = render_help(entries, who, session.deps.settings.access, session.agent.registry.specs, lang, topic)
    return text + "".join("\n\n" + line(lang) for line in session.status_lines)
