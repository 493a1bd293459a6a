"""Load and validate the whole config directory: `load_dir(path) -> Settings`.

Each known file maps to one section model; a missing file means that section's defaults; an
unknown *.yaml file is an error (a typo in a file name must not silently disable a section).
Cross-checks run after every file validated, and every error reads `file:line: key: problem`.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from xihe.agent.errors import ConfigError, ConfigErrors
from xihe.config.access import AccessConfig
from xihe.config.core import CoreConfig
from xihe.config.workflows import WorkflowsConfig
from xihe.config.yamlmodel import MAX_BYTES, config_error, load_model

# file name → (Settings attribute, model). Order is the order errors are reported in.
SECTIONS: dict[str, tuple[str, type[BaseModel] | str]] = {
    "xihe.yaml": ("core", CoreConfig),
    "access.yaml": ("access", AccessConfig),
    "workflows.yaml": ("workflows", WorkflowsConfig),
    # feature sections, imported when loading so this module stays free of feature imports
    "alerts.yaml": ("alerts", "xihe.config.alerts:AlertsConfig"),
    "wecom.yaml": ("wecom", "xihe.config.wecom:WeComConfig"),
    "shell.yaml": ("shell", "xihe.config.shell:ShellConfig"),
    "code.yaml": ("code", "xihe.config.code:CodeConfig"),
    "dolphin.yaml": ("dolphin", "xihe.config.dolphin:DolphinConfig"),
    "longtask.yaml": ("longtask", "xihe.config.longtask:LongTaskConfig"),
    "ops.yaml": ("ops", "xihe.config.ops:OpsConfig"),
    "ui.yaml": ("ui", "xihe.config.ui:UiConfig"),
}


def _model(ref: type[BaseModel] | str) -> type[BaseModel]:
    if isinstance(ref, str):
        module, _, name = ref.partition(":")
        model: type[BaseModel] = getattr(importlib.import_module(module), name)
        return model
    return ref


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


def cross_check(settings: Settings) -> list[ConfigError]:
    """References between files: roles, environments, workflow environments."""
    errors: list[ConfigError] = []
    acc = settings.access
    for uid, user in acc.users.items():
        for i, role in enumerate(user.roles):
            if role not in acc.roles:
                errors.append(
                    problem_at(
                        settings,
                        "access.yaml",
                        ("users", uid, "roles", i),
                        f"undefined role {role!r} (defined: {', '.join(acc.roles) or 'none'})",
                    )
                )
    for i, role_name in enumerate(acc.unknown_user_roles):
        if role_name not in acc.roles:
            errors.append(
                problem_at(
                    settings, "access.yaml", ("unknown_user_roles", i), f"undefined role {role_name!r}"
                )
            )
    for rname, role_cfg in acc.roles.items():
        for i, env in enumerate(role_cfg.environments):
            if env not in acc.environments and env != "*":
                errors.append(
                    problem_at(
                        settings,
                        "access.yaml",
                        ("roles", rname, "environments", i),
                        f"undefined environment {env!r}",
                    )
                )
    for i, wf in enumerate(settings.workflows.workflows):
        if wf.environment not in acc.environments:
            errors.append(
                problem_at(
                    settings,
                    "workflows.yaml",
                    ("workflows", i, "environment"),
                    f"undefined environment {wf.environment!r} (see access.yaml)",
                )
            )
    return errors


def load_dir(
    directory: str | Path, sections: dict[str, tuple[str, type[BaseModel] | str]] | None = None
) -> Settings:
    """Validate every YAML file in `directory`; raise ConfigErrors listing all problems."""
    root = Path(directory)
    known = {**SECTIONS, **(sections or {})}
    settings = Settings(directory=root)
    errors: list[ConfigError] = []
    if not root.is_dir():
        raise ConfigErrors([ConfigError("config directory does not exist", str(root))])
    for path in sorted(root.glob("*.y*ml")):
        if path.name not in known:
            errors.append(ConfigError(f"unknown config file (known: {', '.join(known)})", str(path)))
    for file, (attr, ref) in known.items():
        model = _model(ref)
        path = root / file
        if not path.exists():
            continue  # core sections keep their defaults; a feature section is simply absent
        size = path.stat().st_size
        if size > MAX_BYTES:
            errors.append(
                ConfigError(f"file is {size:,} bytes; config files are limited to {MAX_BYTES:,}", str(path))
            )
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            errors.append(ConfigError(f"not UTF-8 ({exc.reason})", str(path)))
            continue
        except OSError as exc:
            errors.append(ConfigError(f"cannot be read ({type(exc).__name__}: {exc.strerror})", str(path)))
            continue
        settings.texts[file] = text
        try:
            loader = getattr(model, "load_yaml", None)  # a section may add cross-checks (shell.yaml)
            value = loader(text, str(path)) if loader else load_model(text, str(path), model)
        except ConfigErrors as exc:
            errors.extend(exc.errors)
            continue
        except ConfigError as exc:
            errors.append(exc)
            continue
        except Exception as exc:  # a validator bug must still read as file: problem, never a traceback
            errors.append(ConfigError(f"could not be validated ({type(exc).__name__}: {exc})", str(path)))
            continue
        if attr in Settings.__dataclass_fields__:
            setattr(settings, attr, value)
        else:
            settings.extra[attr] = value
    if not errors:
        from xihe.config.semantic import semantic_problems

        errors = cross_check(settings) + semantic_problems(settings)
    if errors:
        raise ConfigErrors(errors)
    return settings
