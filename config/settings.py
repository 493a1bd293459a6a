"""The validated configuration (`Settings`), the description of one config file (`Section`), and
`problem_at`, which turns a key of a loaded file into a `file:line: key: problem` error."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from xihe.agent.errors import ConfigError
from xihe.config.access import AccessConfig
from xihe.config.core import CoreConfig
from xihe.config.workflows import WorkflowsConfig
from xihe.config.yamlmodel import config_error


@dataclass(frozen=True)
class Section:
    """One config file: `<file>` in the config directory, read as `Settings.section(key)`, its model."""

    file: str
    key: str
    model: type[BaseModel]


@dataclass
class Settings:
    """The validated configuration plus where it came from."""

    directory: Path
    core: CoreConfig = field(default_factory=CoreConfig)
    access: AccessConfig = field(default_factory=AccessConfig)
    workflows: WorkflowsConfig = field(default_factory=WorkflowsConfig)
    extra: dict[str, BaseModel] = field(default_factory=dict)  # sections registered by later modules
    texts: dict[str, str] = field(default_factory=dict)

    def section(self, name: str) -> Any:
        """A section by attribute name (core, access, ...), or a feature section; None when not configured."""
        return getattr(self, name) if name in Settings.__dataclass_fields__ else self.extra.get(name)

    def secret(self, env_name: str) -> str | None:
        """The value of a secret the YAML names; never logged."""
        return os.environ.get(env_name) or None


def problem_at(settings: Settings, file: str, loc: tuple[Any, ...], problem: str) -> ConfigError:
    """An error about `loc` in `file` of this directory, with its line and readable key."""
    return config_error(settings.texts.get(file, ""), str(settings.directory / file), loc, problem)
