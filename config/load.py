"""Load and validate the whole config directory: `load_dir(path) -> Settings`.

Each known file maps to one section model; a missing file means that section's defaults; an
unknown *.yaml file is an error (a typo in a file name must not silently disable a section).
Cross-checks run after every file validated, and every error reads `file:line: key: problem`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from xihe.agent.errors import ConfigError, ConfigErrors
from xihe.config.access import AccessConfig
from xihe.config.core import CoreConfig
from xihe.config.semantic import semantic_problems
from xihe.config.settings import Section, Settings, problem_at
from xihe.config.workflows import WorkflowsConfig
from xihe.config.yamlmodel import MAX_BYTES, load_model

__all__ = ["CORE_SECTIONS", "Section", "Settings", "host_problems", "load_dir", "problem_at", "secrets_of"]

# the spine's own files; features bring theirs (`Section`s) in the order they are listed
CORE_SECTIONS: tuple[Section[Any], ...] = (
    Section("xihe.yaml", "core", CoreConfig),
    Section("access.yaml", "access", AccessConfig),
    Section("workflows.yaml", "workflows", WorkflowsConfig),
)


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


def host_problems(settings: Settings, sections: Iterable[Section[Any]]) -> list[ConfigError]:
    """What this host lacks for the loaded files to work (a workspace or repository that is not a
    directory here): each section model's `host_problems()`, as `file:line: key: problem`. Not part
    of loading, which must work wherever the files are checked; `xihe config check` runs it."""
    errors: list[ConfigError] = []
    for section in (*CORE_SECTIONS, *sections):
        check = getattr(settings.get(section), "host_problems", None)
        for loc, problem in check() if check is not None else ():
            errors.append(problem_at(settings, section.file, loc, problem))
    return errors


def load_dir(directory: str | Path, sections: Iterable[Section[Any]] = ()) -> Settings:
    """Validate every YAML file in `directory` against the core files and the features' `sections`;
    raise ConfigErrors listing all problems."""
    root = Path(directory)
    known = {s.file: s for s in (*CORE_SECTIONS, *sections)}
    settings = Settings(directory=root, sections=tuple(known.values()))
    errors: list[ConfigError] = []
    if not root.is_dir():
        raise ConfigErrors([ConfigError("config directory does not exist", str(root))])
    for path in sorted(root.glob("*.y*ml")):
        if path.name not in known:
            errors.append(ConfigError(f"unknown config file (known: {', '.join(known)})", str(path)))
    for file, section in known.items():
        attr, model = section.key, section.model
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
        errors = cross_check(settings) + semantic_problems(settings, list(known.values()))
    if errors:
        raise ConfigErrors(errors)
    return settings


def secret_env_names(value: Any) -> set[str]:
    """Every `*_env` value at any depth of a config section (a model, dict or list)."""
    if isinstance(value, BaseModel):
        value = value.model_dump()
    names: set[str] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for k, v in item.items():
                if isinstance(k, str) and k.endswith("_env") and isinstance(v, str) and v:
                    names.add(v)
                else:
                    stack.append(v)
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return names


def secrets_of(settings: Settings) -> list[str]:
    """Every secret value the config names through an environment variable, in any file."""
    sections = [settings.core, settings.access, settings.workflows, *settings.extra.values()]
    names = set().union(*(secret_env_names(s) for s in sections))
    return [os.environ[n] for n in sorted(names) if os.environ.get(n)]
