"""Docker back end: used only when configured and `docker info` answers."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from xihe.tools.shell.execute import BASE_ENV, RunPlan, SaveArtifact, ShellResult, execute, throwaway_copy


class DockerSandbox:
    """Docker back end: used only when configured and `docker info` answers."""

    name = "docker"

    def __init__(self, image: str, docker: str | None = None) -> None:
        self.image = image
        self.docker = docker or shutil.which("docker") or ""
        self._available: bool | None = None

    def warnings(self) -> list[str]:
        """Docker limits memory and processes per container: nothing weaker to report."""
        return []

    def available(self) -> bool:
        """The docker client exists and its engine answers `docker info` (probed once)."""
        if self._available is None:
            ok = bool(self.docker)
            if ok:
                try:
                    ok = (
                        subprocess.run([self.docker, "info"], capture_output=True, timeout=10).returncode == 0
                    )
                except (OSError, subprocess.SubprocessError):
                    ok = False
            self._available = ok
        return self._available

    def command(self, plan: RunPlan, name: str, workspace_copy: Path | None = None) -> list[str]:
        """The `docker run` argv for a plan; env values come from the client's environment (`-e NAME`)."""
        lim = plan.limits
        cmd = [
            self.docker,
            "run",
            "--rm",
            "--name",
            name,
            "--network",
            "bridge" if plan.network else "none",
            "--read-only",
            "--tmpfs",
            f"/tmp:rw,size={lim.tmp_size_mb}m,mode=1777",
            "--pids-limit",
            str(lim.processes),
            "--memory",
            f"{lim.memory_mb}m",
            "--ulimit",
            f"cpu={lim.cpu_seconds}:{lim.cpu_seconds + 1}",
            "--ulimit",
            f"fsize={lim.file_size_mb << 20}:{lim.file_size_mb << 20}",
            "--cap-drop",
            "ALL",
            "--security-opt",
            "no-new-privileges",
            "--user",
            f"{plan.uid}:{plan.uid}",
            "--workdir",
            str(plan.cwd or "/tmp"),
        ]
        for root in plan.workspaces.values():
            if workspace_copy is not None and root == plan.writable:
                cmd += ["--volume", f"{workspace_copy}:{root}:rw"]
            else:
                cmd += ["--volume", f"{root}:{root}:ro"]
        for key in plan.env:
            cmd += ["--env", key]
        return [*cmd, self.image, *plan.argv]

    def run(self, plan: RunPlan, save_artifact: SaveArtifact | None) -> ShellResult:
        """Run in a throwaway container; on timeout the container is killed by name."""
        name = f"xihe-shell-{uuid.uuid4().hex[:12]}"
        copy = throwaway_copy(plan.writable, plan.uid, plan.uid) if plan.writable is not None else None

        def kill_container() -> None:
            subprocess.run([self.docker, "kill", name], capture_output=True, timeout=10, check=False)

        env = {**plan.env, "PATH": os.environ.get("PATH", BASE_ENV["PATH"])}
        try:
            return execute(
                self.command(plan, name, copy),
                _with_env(plan, env),
                sandbox=self.name,
                save_artifact=save_artifact,
                signal_offset=True,
                on_kill=kill_container,
                workspace_copy=copy is not None,
            )
        finally:
            if copy is not None:
                shutil.rmtree(copy.parent, ignore_errors=True)


def _with_env(plan: RunPlan, env: Mapping[str, str]) -> RunPlan:
    return replace(plan, env=dict(env))
