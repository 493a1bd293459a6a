"""The validated configuration (`Settings`), the description of one config file (`Section`), and
`problem_at`, which turns a key of a loaded file into a `file:line: key: problem` error."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from xihe.agent.errors import ConfigError
from xihe.config.access import AccessConfig
from xihe.config.core import CoreConfig
from xihe.config.workflows import WorkflowsConfig
from xihe.config.yamlmodel import config_error

M = TypeVar("M", bound=BaseModel)
Loc = tuple[Any, ...]  # a key path inside a file, e.g. ("entries", 0, "roles", 1)
Problem = tuple[str, Loc, str]  # (file, key path, what is wrong) of a check across files


@dataclass(frozen=True)
class Section(Generic[M]):
    """One config file: `<file>` in the config directory, its model, and the typed key it is read
    with (`Settings.get(section) -> model | None`). The module of the model defines it.

    `checks` finds what the model cannot check alone: names it refers to in other files (and names
    other files refer to in it). `tool_names` gives the lists of tool names in it (each must name a
    tool)."""

    file: str
    key: str
    model: type[M]
    checks: Callable[[Settings, M], Iterable[Problem]] | None = None
    tool_names: Callable[[M], Iterable[tuple[Loc, list[str]]]] | None = None


@dataclass
class Settings:
    """The validated configuration plus where it came from."""

    directory: Path
    core: CoreConfig = field(default_factory=CoreConfig)
    access: AccessConfig = field(default_factory=AccessConfig)
    workflows: WorkflowsConfig = field(default_factory=WorkflowsConfig)
    extra: dict[str, BaseModel] = field(default_factory=dict)  # sections registered by later modules
    texts: dict[str, str] = field(default_factory=dict)
    sections: tuple[Section[Any], ...] = ()  # every section it was loaded with, core first

    def get(self, section: Section[M]) -> M | None:
        """A section's model (core, access, ... or a feature's); None when its file is absent."""
        key = section.key
        value = getattr(self, key) if key in Settings.__dataclass_fields__ else self.extra.get(key)
        if value is not None and not isinstance(value, section.model):
            raise TypeError(
                f"{section.file} was loaded as {type(value).__name__}, not {section.model.__name__}"
            )
        return value

    def secret(self, env_name: str) -> str | None:
        """The value of a secret the YAML names; never logged."""
        return os.environ.get(env_name) or None


def problem_at(settings: Settings, file: str, loc: tuple[Any, ...], problem: str) -> ConfigError:
    """An error about `loc` in `file` of this directory, with its line and readable key."""
    return config_error(settings.texts.get(file, ""), str(settings.directory / file), loc, problem)
