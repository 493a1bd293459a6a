"""`config/shell.yaml` as a whole: `ShellConfig` (sandbox settings and entries), its cross-checks, loading.

Every error reads `file:line: key: problem` (config/yamlmodel.py), for pydantic's checks and the
cross-checks alike.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from xihe.agent.errors import ConfigErrors
from xihe.config.semantic import unknown_name
from xihe.config.settings import Problem, Section, Settings
from xihe.config.shell.entry import Entry
from xihe.config.shell.entry_checks import entry_problems
from xihe.config.shell.sandbox import Limits, UidRange
from xihe.config.yamlmodel import config_error, load_model


class ShellConfig(BaseModel):
    """The whole shell whitelist and sandbox settings."""

    model_config = ConfigDict(extra="forbid")

    sandbox: Literal["bwrap", "docker", "none"] = Field(
        "bwrap", description="bwrap (default) | docker | none (explicit opt-out: runs unsandboxed, loudly)"
    )
    docker_image: str = Field("debian:bookworm-slim", description="image for the docker back end")
    workspaces: dict[str, str] = Field(
        default_factory=dict, description="name -> absolute path of a working tree"
    )
    ro_binds: list[str] = Field(
        default_factory=list, description="extra absolute paths bound read-only (e.g. a Python installation)"
    )
    run_as_uids: UidRange = Field(
        default_factory=lambda: UidRange.model_validate({}),
        description="each running command gets its own uid (= gid) from this range",
    )
    cgroup: Literal["auto", "required", "none"] = Field(
        "auto",
        description="auto: limit each command's total memory and processes with a cgroup when this host "
        "offers one, else fall back to per-process rlimits (reported loudly) | required: refuse to run "
        "commands without a cgroup | none: per-process rlimits only",
    )
    limits: Limits = Field(
        default_factory=lambda: Limits.model_validate({}), description="global resource limits"
    )
    artifact_cap_mb: int = Field(16, ge=1, le=1024, description="largest full-output artifact kept, MB")
    max_argv_chars: int = Field(8192, ge=64, le=131072, description="longest whole argv in characters")
    entries: list[Entry] = Field(default_factory=list)
    # Keys that were moved or replaced: present only to name the new place in a clear error.
    production_environments: None = Field(None, exclude=True, description="removed: see access.yaml")
    run_as_uid: None = Field(None, exclude=True, description="removed: see run_as_uids")
    run_as_gid: None = Field(None, exclude=True, description="removed: see run_as_uids")

    @field_validator("production_environments", mode="before")
    @classmethod
    def _production_moved(cls, value: Any) -> None:
        raise ValueError(
            "moved to access.yaml: mark an environment `production: true` under `environments:` there "
            "(one place decides production for every tool), then delete this key"
        )

    @field_validator("run_as_uid", "run_as_gid", mode="before")
    @classmethod
    def _uid_replaced(cls, value: Any) -> None:
        raise ValueError(
            "replaced by `run_as_uids: {first: N, count: M}`: each command now runs as its own uid "
            "(and gid) from that range"
        )

    def host_problems(self) -> list[tuple[tuple[Any, ...], str]]:
        """What this host lacks for the file to work (`xihe config check`): a workspace that is not
        a directory here. Not part of loading: the files may be checked on another machine."""
        return [
            (("workspaces", name), problem)
            for name, path in self.workspaces.items()
            if (problem := _not_a_dir(path))
        ]

    @classmethod
    def load_yaml(cls, text: str, name: str) -> ShellConfig:
        """Validation plus cross-checks (what `xihe.config.load.load_dir` calls for shell.yaml)."""
        return load_shell_config(text, name)


def _not_a_dir(path: str) -> str:
    """Why `path` cannot be a working tree on this host ('' when it can)."""
    if not Path(path).exists():
        return f"workspace {path} does not exist on this host"
    if not Path(path).is_dir():
        return f"workspace {path} is not a directory"
    return ""


def cross_check(cfg: ShellConfig) -> list[tuple[tuple[Any, ...], str]]:
    """Checks across fields that pydantic cannot express: (loc, problem) pairs."""
    out: list[tuple[tuple[Any, ...], str]] = []
    for name, path in cfg.workspaces.items():
        if not Path(path).is_absolute():
            out.append((("workspaces", name), "a workspace path must be absolute"))
    for j, path in enumerate(cfg.ro_binds):
        if not Path(path).is_absolute():
            out.append((("ro_binds", j), "a bind path must be absolute"))
    seen: dict[str, int] = {}
    for i, e in enumerate(cfg.entries):
        if e.name in seen:
            out.append(
                (("entries", i, "name"), f"duplicate entry name {e.name!r} (first at entries.{seen[e.name]})")
            )
        seen.setdefault(e.name, i)
        out += entry_problems(i, e, cfg.workspaces)
    return out


def load_shell_config(text: str, name: str = "config/shell.yaml") -> ShellConfig:
    """Validate shell whitelist YAML; raise ConfigErrors reading `file:line: key: problem`."""
    cfg = load_model(text, name, ShellConfig)
    problems = cross_check(cfg)
    if problems:
        raise ConfigErrors([config_error(text, name, loc, p) for loc, p in problems])
    return cfg


def access_problems(settings: Settings, cfg: ShellConfig) -> Iterator[Problem]:
    """Roles and environments of the entries that access.yaml does not define."""
    access = settings.access
    for i, entry in enumerate(cfg.entries):
        for key, kind, names, known in (
            ("roles", "role", entry.roles, set(access.roles)),
            ("environments", "environment", entry.environments, set(access.environments)),
        ):
            for j, name in enumerate(names):
                if name not in known:
                    where = f"access.yaml {key}"
                    yield "shell.yaml", ("entries", i, key, j), unknown_name(kind, name, known, where)


SHELL_SECTION = Section("shell.yaml", "shell", ShellConfig, checks=access_problems)


def load_shell_file(path: str | Path) -> ShellConfig:
    """Read and validate a shell whitelist file."""
    p = Path(path)
    return load_shell_config(p.read_text(encoding="utf-8"), str(p))
