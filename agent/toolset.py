"""The tool set the model receives for a config directory, and the checks of every tool name in it.

One function builds it for `build_app`, `xihe tools` and `xihe config check` alike: the features'
tools (each built from its section by `install`; the app passes them in) and the plugins, filtered
by `xihe.yaml tools`. Tool names in `xihe.yaml tools`, `access.yaml roles.*.tools` and `longtask.yaml
memory.fact_tools` must name a tool that exists; a tool a feature declares (`Feature.tools`) still
counts while the feature is off (its file absent, or its credentials unset), so switching
DolphinScheduler off does not break access.yaml.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import Any

from sqlalchemy import create_engine

from xihe.agent.artifacts import ArtifactStore
from xihe.agent.audit import SqlAuditSink
from xihe.agent.clock import utc_now
from xihe.agent.deps import Deps
from xihe.agent.errors import ConfigError, ConfigErrors
from xihe.agent.pending import PendingStore
from xihe.agent.redact import Redactor
from xihe.agent.registry import Registry, ToolSpec, build_registry
from xihe.agent.task_store import TaskStore
from xihe.config.load import Settings, problem_at
from xihe.config.semantic import did_you_mean


def load_plugins(settings: Settings) -> list[ToolSpec]:
    """Import `module:ATTR` tool specs named in xihe.yaml `plugins` (a spec or a sequence of specs)."""
    specs: list[ToolSpec] = []
    for i, path in enumerate(settings.core.plugins):
        module_name, _, attr = path.partition(":")
        try:
            value: Any = getattr(importlib.import_module(module_name), attr or "SPEC")
        except (ImportError, AttributeError) as exc:
            problem = f"cannot import tool plugin {path!r}: {exc}"
            raise problem_at(settings, "xihe.yaml", ("plugins", i), problem) from None
        specs.extend(value if isinstance(value, list | tuple) else [value])
    return specs


def offline_deps(settings: Settings) -> Deps:
    """Deps over an in-memory store: enough to build tool specs without touching the real database."""
    engine = create_engine("sqlite://")
    return Deps(
        settings=settings,
        engine=engine,
        clock=utc_now,
        tasks=TaskStore(engine),
        audit=SqlAuditSink(engine),
        pending=PendingStore(engine),
        artifacts=ArtifactStore(engine),
        redactor=Redactor(),
    )


def _is_glob(pattern: str) -> bool:
    return any(ch in pattern for ch in "*?[")


def name_problems(
    settings: Settings, specs: list[ToolSpec], declared: Iterable[str] = ()
) -> list[ConfigError]:
    """Tool names in xihe.yaml, access.yaml and the feature sections (`Section.tool_names`, e.g.
    longtask.yaml) that name no tool (`declared`: the names features add when they are on, which stay
    valid while a feature is off)."""
    known = sorted({s.name for s in specs} | set(declared))
    places: list[tuple[str, tuple[Any, ...], list[str]]] = [("xihe.yaml", ("tools",), settings.core.tools)]
    for role_name, role in settings.access.roles.items():
        places.append(("access.yaml", ("roles", role_name, "tools"), role.tools))
    for section in settings.sections:
        value = settings.get(section)
        if section.tool_names is not None and value is not None:
            places += [(section.file, loc, names) for loc, names in section.tool_names(value)]
    errors = []
    for file, loc, names in places:
        for i, name in enumerate(names):
            if not _is_glob(name) and name not in known:
                problem = f"unknown tool {name!r}{did_you_mean(name, known)}"
                if not did_you_mean(name, known):
                    problem += f" (known: {', '.join(known)})"
                errors.append(problem_at(settings, file, (*loc, i), problem))
    return errors


def build_tools(settings: Settings, feature_specs: list[ToolSpec], declared: Iterable[str] = ()) -> Registry:
    """The registry the model's schemas come from: the features' tools and the plugins, filtered by
    `xihe.yaml tools`; ConfigErrors for names that match no tool (or no `declared` feature tool)."""
    specs = [*feature_specs, *load_plugins(settings)]
    errors = name_problems(settings, specs, declared)
    if errors:
        raise ConfigErrors(errors)
    present = {s.name for s in specs}
    enabled = [p for p in settings.core.tools if _is_glob(p) or p in present]  # off features: not offered
    return build_registry(specs, enabled)
