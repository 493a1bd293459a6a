"""`run_shell_command`: the model names a whitelisted entry and fills typed arguments; it never writes a command line.

agent/features/shell.py wraps it in a ToolSpec, builds the argument model with `args_model(whitelist)`
so the schema lists the entries, and writes the audit record with `audit_fields(...)`. Who may run
what is the gate's decision (tools/shell/policy.py gives it the entry's per-call inputs).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from xihe.tools.shell.messages import artifact_text, head_text, not_started_text
from xihe.tools.shell.sandbox import ShellResult
from xihe.tools.shell.template import render_values, template_text
from xihe.tools.shell.whitelist import Match, ShellRefused, Whitelist

MASK = "***"


class Args(BaseModel):
    """Arguments of run_shell_command as the model sends them."""

    model_config = ConfigDict(extra="forbid")

    command: str = Field(description="name of a whitelisted command entry (not a command line)")
    args: dict[str, str | int] = Field(
        default_factory=dict, description='the entry\'s arguments by name, e.g. {"path": "tests", "count": 5}'
    )
    flags: list[str] = Field(default_factory=list, description='optional flags the entry allows, e.g. ["-x"]')


def describe_entries(whitelist: Whitelist) -> str:
    """One line per entry: name, description, template and typed arguments (what the model reads)."""
    lines = []
    for e in whitelist.entries.values():
        args = []
        for name, spec in e.args.items():
            kind: str = spec.type
            if spec.type == "enum":
                kind = "one of " + "|".join(spec.choices)
            elif spec.type == "integer":
                kind = f"integer {spec.min}..{spec.max}"
            elif spec.type == "string":
                kind = f"string matching {spec.pattern}"
            opt = "" if spec.required else ", optional"
            args.append(f"{name} ({kind}{opt}): {spec.description}")
        flags = f" flags: {', '.join(e.flags)}." if e.flags else ""
        risk = " Needs confirmation." if e.risk == "write" else ""
        lines.append(
            f"- {e.name}: {e.description} `{template_text(e)}`. Args: {'; '.join(args) or 'none'}."
            f"{flags}{risk}"
        )
    return "\n".join(lines)


def args_model(whitelist: Whitelist) -> type[Args]:
    """An Args model whose `command` is an enum of the entries and whose descriptions list them."""
    names = tuple(whitelist.entries)
    listing = describe_entries(whitelist)
    command_type: Any = Literal[names] if names else str
    model: type[Args] = create_model(
        "run_shell_command_args",
        __base__=Args,
        command=(command_type, Field(description="which whitelisted command to run:\n" + listing)),
    )
    return model


# the tool's description: the entries are listed once, in the `command` argument's description
TOOL_DESCRIPTION = (
    "Run one whitelisted command (no shell) in a sandbox and return its exit code and capped output. "
    "Pick an entry of `command` (each is described there) and give its typed arguments; anything else "
    "is refused."
)


def redact_argv(match: Match) -> tuple[str, ...]:
    """The argv with values of `secret: true` arguments masked (embedded values too)."""
    secrets = {name for name, spec in match.entry.args.items() if spec.secret and name in match.values}
    if not secrets:
        return match.argv
    masked = {k: (MASK if k in secrets else v) for k, v in match.values.items()}
    return render_values(match.entry, masked, match.flags)


def shown_argv(match: Match, whitelist: Whitelist) -> tuple[str, ...]:
    """The argv as people read it (a task's goal): secret values masked, paths relative to their workspace."""
    values = whitelist.shown_values(match)
    masked = {k: (MASK if match.entry.args[k].secret else v) for k, v in values.items()}
    return render_values(match.entry, masked, match.flags)


def redact_args(match: Match) -> dict[str, str]:
    """The argument values with secrets masked."""
    return {k: (MASK if match.entry.args[k].secret else v) for k, v in match.values.items()}


def audit_fields(
    match: Match, result: ShellResult | None, user: str, *, refused: ShellRefused | None = None
) -> dict[str, Any]:
    """What the audit record keeps: argv (redacted), entry, user, exit, duration, digest, sandbox."""
    out: dict[str, Any] = {
        "entry": match.entry.name,
        "argv": list(redact_argv(match)),
        "user": user,
        "args": redact_args(match),
    }
    if result is not None:
        out.update(
            exit_code=result.exit_code,
            duration_s=round(result.duration_s, 3),
            output_sha256=result.output_sha256,
            stdout_bytes=result.stdout_bytes,
            stderr_bytes=result.stderr_bytes,
            sandbox=result.sandbox,
            killed_by=result.killed_by,
            limit=result.limit,
            artifact_ref=result.artifact_ref,
        )
        if result.sandbox_error is not None:
            out.update(sandbox_error=result.sandbox_error)
    if refused is not None:
        out.update(refused=refused.reason)
    return out


def result_text(result: ShellResult) -> str:
    """What the model sees: exit status, kill reason and the capped stdout/stderr."""
    parts = [
        head_text(
            result.entry, result.exit_code, result.duration_s, result.sandbox, result.killed_by, result.limit
        )
    ]
    if result.sandbox_error is not None:
        parts.append(not_started_text(result.sandbox_error))
    if result.stdout:
        parts.append("stdout:\n" + result.stdout)
    if result.stderr:
        parts.append("stderr:\n" + result.stderr)
    if result.artifact_ref and (result.stdout_truncated or result.stderr_truncated):
        parts.append(artifact_text(result.artifact_ref))
    return "\n".join(parts)
