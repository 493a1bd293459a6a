"""What the gate decides on, for policy explain and help: a tool, or one entry of a tool (a shell entry)."""

from __future__ import annotations

from dataclasses import dataclass

from xihe.agent.gate import Scope


@dataclass(frozen=True)
class Subject:
    """One thing the gate decides on: a tool, or one shell entry of `run_shell_command`."""

    label: str  # "trigger_dolphinscheduler", "run_shell_command:git_log"
    tool: str
    places: tuple[tuple[str, str], ...]  # (environment, risk there); environment '' = acts on none
    scope: Scope | None = None
