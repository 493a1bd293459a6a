"""Run a matched argv without a shell inside a sandbox: bubblewrap by default, Docker when configured.

The back ends live in bwrap.py and docker.py (the plan, limits and capture they share in
execute.py); `sandbox: none` is the admin's explicit, loudly reported opt-out. `ShellRunner`
refuses to run anything when the configured sandbox is missing, and `status()` and `warnings()`
say how commands run here (every weaker mode named).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from xihe.agent.errors import ToolFailed
from xihe.agent.i18n import text
from xihe.config.shell.file import ShellConfig
from xihe.tools.shell.bwrap import BwrapSandbox
from xihe.tools.shell.capture import TempArtifacts
from xihe.tools.shell.docker import DockerSandbox
from xihe.tools.shell.execute import RunPlan, SaveArtifact, ShellResult, execute, plan_for, throwaway_copy
from xihe.tools.shell.messages import SH
from xihe.tools.shell.whitelist import Match

__all__ = ["BwrapSandbox", "DockerSandbox", "RunPlan", "ShellResult", "ShellRunner", "plan_for"]

log = logging.getLogger(__name__)


class Backend(Protocol):
    """A way to run a RunPlan; `available()` says whether it works on this host."""

    name: str

    def available(self) -> bool:
        """True when this back end can run commands here."""
        ...

    def run(self, plan: RunPlan, save_artifact: SaveArtifact | None) -> ShellResult:
        """Run the plan and return its result; never raises for the command's own failure."""
        ...

    def warnings(self) -> list[str]:
        """Ways commands run here with weaker isolation or limits than designed (empty: none)."""
        ...


class Unsandboxed:
    """`sandbox: none`: the admin's explicit opt-out. Still no shell, rlimits and process-group kill."""

    name = "none"

    def available(self) -> bool:
        """Always available."""
        return True

    def warnings(self) -> list[str]:
        """Reported on its own (SHELL SANDBOX DISABLED), loudly."""
        return []

    def run(self, plan: RunPlan, save_artifact: SaveArtifact | None) -> ShellResult:
        """Run directly in the workspace (a writing entry still gets a throwaway copy as its cwd)."""
        copy = throwaway_copy(plan.writable, None, None) if plan.writable is not None else None
        try:
            cwd = plan.cwd or Path(tempfile.gettempdir())
            if copy is not None and plan.writable is not None and plan.cwd is not None:
                cwd = copy / plan.cwd.relative_to(plan.writable)
            return execute(
                list(plan.argv),
                plan,
                sandbox=self.name,
                save_artifact=save_artifact,
                signal_offset=False,
                workspace_copy=copy is not None,
                cwd=cwd,
            )
        finally:
            if copy is not None:
                shutil.rmtree(copy.parent, ignore_errors=True)


def make_backend(config: ShellConfig) -> Backend:
    """The back end the config names (availability is checked when used, not here)."""
    if config.sandbox == "bwrap":
        return BwrapSandbox(
            cgroup=config.cgroup, uid_range=(config.run_as_uids.first, config.run_as_uids.count)
        )
    if config.sandbox == "docker":
        return DockerSandbox(config.docker_image)
    return Unsandboxed()


def sandbox_warnings(config: ShellConfig) -> list[str]:
    """What `xihe config check` reports about running this config's commands on this host."""
    backend = make_backend(config)
    if backend.name == "none":
        return ["sandbox: none: shell commands run unsandboxed, with the bot's privileges"]
    if not backend.available():
        why = getattr(backend, "why_unavailable", "")
        return [
            f"shell commands are refused: sandbox {backend.name} is not available here ({why or 'see the log'})"
        ]
    return backend.warnings()


@dataclass(frozen=True)
class SandboxStatus:
    """What `/help` and start-up logging show about the sandbox."""

    backend: str
    available: bool
    unsandboxed: bool
    detail: str
    warnings: tuple[str, ...] = ()
    why: str = ""  # why an unavailable sandbox is missing, when the back end knows


class ShellRunner:
    """Runs matched commands in the configured sandbox; refuses when that sandbox is missing."""

    def __init__(
        self,
        config: ShellConfig,
        *,
        save_artifact: SaveArtifact | None = None,
        backend: Backend | None = None,
    ) -> None:
        self.config = config
        # the default store makes its temp directory only when it first saves something
        self.save_artifact = (
            save_artifact
            if save_artifact is not None
            else TempArtifacts(max_bytes=config.artifact_cap_mb << 20)
        )
        self.backend: Backend = backend if backend is not None else make_backend(config)
        if self.backend.name == "none":
            log.warning(
                "SHELL SANDBOX DISABLED (sandbox: none in shell.yaml): whitelisted commands run directly "
                "on this host with the bot's privileges"
            )
        elif self.backend.available():
            for warning in self.backend.warnings():
                log.warning("shell sandbox: %s", warning)

    @property
    def unsandboxed(self) -> bool:
        """True when the admin opted out of sandboxing; /help says so."""
        return self.backend.name == "none"

    def status(self) -> SandboxStatus:
        """Back end name, whether it works here, and a sentence for /help."""
        ok = self.backend.available()
        why = "" if ok else getattr(self.backend, "why_unavailable", "")
        if self.unsandboxed:
            detail = "WARNING: shell commands run without a sandbox (sandbox: none)"
        elif ok:
            detail = f"shell commands run in {self.backend.name}"
        else:
            detail = (
                f"shell commands are refused: sandbox {self.backend.name} is not available on this host"
                + (f" ({why})" if why else "")
            )
        warnings = tuple(self.backend.warnings()) if ok else ()
        return SandboxStatus(self.backend.name, ok, self.unsandboxed, detail, warnings, why)

    def run(self, match: Match, save_artifact: SaveArtifact | None = None) -> ShellResult:
        """Run one matched command (artifact callback per call if given); ToolFailed when no sandbox."""
        if not self.backend.available():
            why = text(SH, "no_sandbox", entry=repr(match.entry.name), sandbox=repr(self.backend.name))
            raise ToolFailed(why)
        return self.backend.run(plan_for(match, self.config), save_artifact or self.save_artifact)
