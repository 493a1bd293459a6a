"""The whitelisted shell in the product: tool `run_shell_command`, chat form `/sh <line>`, hot reload.

The gate decides every call with per-call inputs from tools/shell/policy.py (the same ones
`xihe shell check` uses): the risk follows the entry (a write entry, or any entry run on an
environment access.yaml marks production, waits for `/confirm`), the entry's `environments` give
the call's environment, and its `roles`/`environments` narrow the tool grant (a `Scope`). `/sh` goes
through `session.run_tool`, so the same registry, gate, confirmation and audit apply; a line that
matches no entry is refused with the closest entry and the failing argument, and nothing runs.
Every run writes a `shell` audit event (argv redacted, entry, user, exit code, duration, output
digest, sandbox) and keeps the full output as an artifact.

After a crash interrupted a write entry, the tool's `lookup` runs the entry's `check:` command (if it
has one) to learn whether the write happened; without a check the outcome is unknown and the user is
asked before it runs again (see `xihe.agent.frontier.frontier`).
"""

from __future__ import annotations

import hashlib
import logging
import shlex
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xihe.agent.audit import AuditEvent
from xihe.agent.deps import Services
from xihe.agent.errors import ConfigError, OutcomeUnknown, ToolError
from xihe.agent.feature import Context, Feature, Installed, Job, Runtime
from xihe.agent.gate import Scope, Who
from xihe.agent.help import HelpEntry
from xihe.agent.i18n import Lang, say, say_md
from xihe.agent.inbound import reply_lang
from xihe.agent.registry import Risk, ToolContext, ToolSpec
from xihe.agent.subject import Subject
from xihe.config.access import AccessConfig
from xihe.config.shell.file import SHELL_SECTION, ShellConfig
from xihe.tools.shell.messages import SH, STATUS, refusal_text, result_for_people
from xihe.tools.shell.policy import (
    entry_environment,
    entry_risk,
    entry_scope,
    entry_subject,
    help_text,
    runnable,
)
from xihe.tools.shell.reload import ReloadingWhitelist
from xihe.tools.shell.sandbox import ShellRunner
from xihe.tools.shell.tool import (
    MASK,
    TOOL_DESCRIPTION,
    Args,
    args_model,
    audit_fields,
    result_text,
    shown_argv,
)
from xihe.tools.shell.whitelist import Match, ShellRefused, Whitelist

if TYPE_CHECKING:
    from xihe.agent.commands import Command
    from xihe.agent.deps import Deps
    from xihe.agent.inbound import Inbound
    from xihe.agent.session import Session

log = logging.getLogger("xihe.shell")
TOOL = "run_shell_command"


def _digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""


class ShellService:
    """The live whitelist and runner of one process; `reload()` swaps both only for a valid file."""

    def __init__(self, deps: Deps, path: Path) -> None:
        self.deps = deps
        self.path = path
        self.holder = ReloadingWhitelist(path)
        self.runner = ShellRunner(self.config)
        self.file_digest = _digest(path)

    @property
    def whitelist(self) -> Whitelist:
        """The current (last good) whitelist."""
        return self.holder.current

    @property
    def config(self) -> ShellConfig:
        """The current (last good) shell config."""
        return self.holder.current.config

    @property
    def last_error(self) -> ConfigError | None:
        """Why the latest reload was refused (None when the file on disk is the one running)."""
        return self.holder.last_error

    # ---- per call: the gate's inputs (tools/shell/policy.py), shared with `xihe shell check` ----------
    def entry_risk(self, args: Args, deps: Deps) -> Risk:
        """A write entry, or any entry run on a production environment, needs confirmation."""
        entry = self.whitelist.entries.get(args.command)
        if entry is None:
            return "read"  # refused by the whitelist before anything runs
        env = entry_environment(entry, args.args)
        return "write" if entry_risk(entry, env, deps.settings.access) == "write" else "read"

    def entry_environment(self, args: Args, deps: Deps) -> str:
        """Where the call acts: an argument naming one of the entry's environments, else its first one."""
        entry = self.whitelist.entries.get(args.command)
        return "" if entry is None else entry_environment(entry, args.args)

    def entry_scope(self, args: Args, deps: Deps) -> Scope | None:
        """The entry's `roles` and `environments`, which the gate checks on top of the tool grant."""
        entry = self.whitelist.entries.get(args.command)
        return None if entry is None else entry_scope(entry)

    def run(self, args: Args, ctx: ToolContext) -> str:
        """The tool body: validate against the whitelist, check roles, run sandboxed, audit."""
        deps = ctx.deps
        try:
            match = self.whitelist.from_args(args.command, args.args, args.flags)
        except ShellRefused as exc:
            raise self._masked(exc, args) from None

        def save(data: bytes) -> str:
            return deps.artifacts.put(
                data,
                ctx.now,
                task_id=ctx.task_id,
                step_key=ctx.step_key,
                owner=ctx.user,
                name=f"{TOOL} {match.entry.name} full output",
            ).id

        result = self.runner.run(match, save)
        outcome = "ran" if result.ok else "nonzero" if result.killed_by is None else "killed"
        self._audit(ctx, match, result, "sandbox_failed" if result.sandbox_error else outcome)
        return result_text(result)

    def lookup(self, args: Args, ctx: ToolContext) -> str | None:
        """Did an interrupted run of this call happen? The entry's `check:` answers; else OutcomeUnknown."""
        try:
            match = self.whitelist.from_args(args.command, args.args, args.flags)
        except ShellRefused as exc:
            raise OutcomeUnknown(f"the entry cannot be checked: {self._masked(exc, args).reason}") from None
        check = self.whitelist.check_match(match)
        if check is None:
            raise OutcomeUnknown(f"entry {match.entry.name!r} has no check: command to look it up")
        try:
            result = self.runner.run(check)
        except ToolError as exc:
            raise OutcomeUnknown(f"its check could not run: {exc}") from None
        self._audit(ctx, check, result, "check")
        if result.sandbox_error is not None:  # bwrap's own exit 1 is not the check's "did not happen"
            raise OutcomeUnknown(
                f"its check could not run: the sandbox did not start it ({result.sandbox_error})"
            )
        if result.killed_by is None and result.exit_code == 0:
            return f"Not run again: its check says it already happened.\n{result_text(result)}"
        if result.killed_by is None and result.exit_code == 1:
            return None
        how = (
            f"exited {result.exit_code}" if result.killed_by is None else f"was killed by {result.killed_by}"
        )
        raise OutcomeUnknown(f"its check {how} (0 = happened, 1 = did not)")

    def _masked(self, exc: ShellRefused, args: Args) -> ShellRefused:
        """The refusal with the values of secret arguments masked (it is shown, stored and audited)."""
        reason = exc.reason
        for name in self.secret_args() & set(args.args):
            value = str(args.args[name])
            if len(value) >= 4:
                reason = reason.replace(value, MASK)
        return ShellRefused(reason, entry=exc.entry, argument=exc.argument)

    def _audit(
        self, ctx: ToolContext, match: Match, result: Any, outcome: str, reason: str | None = None
    ) -> None:
        deps = ctx.deps
        fields = deps.redactor.data(audit_fields(match, result, ctx.user), self.secret_args())
        deps.audit.record(
            AuditEvent(
                at=deps.clock(),
                kind="shell",
                actor=ctx.user,
                outcome=outcome,
                task_id=ctx.task_id,
                step_key=ctx.step_key,
                tool=TOOL,
                args_redacted={
                    "command": match.entry.name,
                    "args": fields["args"],
                    "flags": list(match.flags),
                },
                reason=reason,
                result_digest=result.output_sha256 if result is not None else None,
                duration_ms=int(result.duration_s * 1000) if result is not None else None,
                external_ids={"artifact_id": result.artifact_ref} if result and result.artifact_ref else None,
                detail=fields,
            )
        )

    # ---- the spec -----------------------------------------------------------------------------
    def secret_args(self) -> frozenset[str]:
        """Names of `secret: true` arguments of any entry (masked wherever the call is recorded)."""
        return frozenset(n for e in self.config.entries for n, a in e.args.items() if a.secret)

    def spec(self) -> ToolSpec:
        """The registry entry built from the current whitelist (rebuilt on reload)."""
        wl = self.whitelist
        return ToolSpec(
            name=TOOL,
            description=TOOL_DESCRIPTION,
            args=args_model(wl),
            run=self.run,
            # static risk = the worst entry (what /help shows); the gate uses the per-call risk_of
            risk="write" if any(e.risk == "write" for e in wl.entries.values()) else "read",
            risk_of=self.entry_risk,
            environment_of=self.entry_environment,
            scope_of=self.entry_scope,
            lookup=self.lookup,
            secret_args=self.secret_args(),
            summarize=result_for_people,
        )

    def reload(self) -> bool:
        """Re-read shell.yaml when it changed; True when a new version was taken."""
        digest = _digest(self.path)
        if digest == self.file_digest:
            return False
        self.file_digest = digest
        if self.holder.reload() is not None:
            return False  # kept the last good whitelist; the error is in last_error and the log
        self.runner = ShellRunner(self.config)
        log.info("shell.yaml reloaded: %d entries", len(self.whitelist.entries))
        return True

    def help_for(self, who: Who, lang: Lang) -> str:
        """`/help sh`: the entries `who` may run (the gate's decision), as lines to type."""
        return help_text(runnable(self.whitelist.entries.values(), who, self.deps.settings.access), lang)

    def subjects(self, access: AccessConfig) -> list[Subject]:
        """Each whitelisted entry as the gate sees it (policy explain, `/help sh`)."""
        return [entry_subject(e, access) for e in self.whitelist.entries.values()]

    def status_line(self, lang: Lang = "en") -> str:
        """The sandbox status for /help in `lang`: loud when sandbox: none or when the sandbox is missing."""
        status = self.runner.status()
        if status.unsandboxed:
            text = say(STATUS, "disabled", lang)
        elif not status.available:
            shown = say(STATUS, "why", lang, why=status.why) if status.why else ""
            text = say(STATUS, "missing", lang, sandbox=status.backend, why=shown)
        else:
            text = say(STATUS, "ok", lang, sandbox=status.backend, n=len(self.whitelist.entries))
            text += "".join("\n" + say(STATUS, "warning", lang, warning=w) for w in status.warnings)
        if self.last_error is not None:
            text += "\n" + say_md(STATUS, "reload_failed", lang, error=self.last_error)  # YAML text quoted
        return text


def service(deps: Deps) -> ShellService | None:
    """The shell service of this process, or None when shell.yaml is absent."""
    return deps.shell if isinstance(deps.shell, ShellService) else None


# ---- feature interface ----------------------------------------------------------------------------
SH_HELP = HelpEntry("/sh COMMAND LINE", "run one whitelisted command (no shell)", "/sh git log --oneline -n 5 -- agent",
                    "执行一条白名单命令（没有 shell）", needs="tool", tool="run_shell_command",
                    detail="The line must match exactly one whitelisted command.",
                    detail_zh="这一行必须恰好匹配一条白名单命令。")  # fmt: skip


def install(ctx: Context) -> Installed:
    """When shell.yaml exists: `run_shell_command`, `/sh` and its help line, the sandbox status under
    /help, and the hot reload of shell.yaml."""
    if ctx.settings.get(SHELL_SECTION) is None:
        return Installed()
    svc = ShellService(ctx.deps, Path(ctx.settings.directory) / "shell.yaml")
    return Installed(
        tools=[svc.spec()],
        services=Services(shell=svc),
        commands={"sh": _sh},
        private_commands={"sh"},
        help=[replace(SH_HELP, more=svc.help_for)],
        status_lines=[svc.status_line],
        jobs=[Job("shell_reload", reload_job, 15)],
    )


FEATURE = Feature("shell", SHELL_SECTION, install, (TOOL,))


def reload_job(app: Runtime) -> None:
    """Take a changed, valid shell.yaml (a bad one keeps the last good version) and re-register the tool."""
    svc = service(app.deps)
    if svc is not None and svc.reload():
        app.registry.replace(svc.spec())


def _sh(session: Session, who: Who, msg: Inbound, cmd: Command) -> str:
    """`/sh <line>`: the line must match exactly one whitelisted template; then it is a normal tool call."""
    deps = session.deps
    svc = service(deps)
    lang = reply_lang(session, msg)
    if svc is None:
        return say(SH, "none", lang)
    if not cmd.rest:
        return say(SH, "usage", lang)
    try:
        match = svc.whitelist.match_line(cmd.rest)
    except ShellRefused as exc:
        reason = exc.reason
        detail: dict[str, Any] = {"line": deps.redactor.text(cmd.rest)[:500]}
        detail.update(closest=exc.entry, argument=exc.argument)
        deps.audit.record(
            AuditEvent(
                at=deps.clock(),
                kind="shell",
                actor=who.user,
                outcome="refused",
                tool="/sh",
                reason=deps.redactor.text(reason),
                detail=detail,
            )
        )
        return refusal_text(exc.code, exc.values, exc.problem, lang)
    args: dict[str, object] = {
        "command": match.entry.name,
        "args": svc.whitelist.shown_values(
            match
        ),  # paths relative to their workspace, as the user wrote them
        "flags": list(match.flags),
    }
    # the task's goal is the line with secret arguments masked and paths relative to their workspace:
    # it is stored and shown in replies, /tasks and the UI, which never show the server's own paths
    shown = replace(msg, text="/sh " + shlex.join(shown_argv(match, svc.whitelist)))
    return session.run_tool(who, shown, TOOL, args).reply
