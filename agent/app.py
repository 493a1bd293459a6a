"""Assemble one bot process from a config directory: stores, registry, LLM, agent, session."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from xihe.agent.artifacts import ArtifactStore
from xihe.agent.audit import SqlAuditSink
from xihe.agent.clock import Clock, utc_now
from xihe.agent.db import open_store_engine
from xihe.agent.deps import Deps, Notify
from xihe.agent.feature import modules as feature_modules
from xihe.agent.holder import holder_name
from xihe.agent.llm import LLMClient
from xihe.agent.loop import Agent
from xihe.agent.pending import PendingStore
from xihe.agent.redact import RedactingFilter, Redactor
from xihe.agent.registry import Registry
from xihe.agent.session import Session
from xihe.agent.tasks import TaskStore
from xihe.agent.toolset import build_tools
from xihe.config.load import Settings, load_dir

log = logging.getLogger("xihe")


@dataclass
class App:
    """A wired bot."""

    settings: Settings
    deps: Deps
    registry: Registry
    agent: Agent
    session: Session


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


def build_app(
    config_dir: str | Path = "config",
    *,
    clock: Clock = utc_now,
    notify: Notify | None = None,
    database_url: str | None = None,
    holder: str | None = None,
) -> App:
    """Load config, open (and migrate) the store, build the registry and the loop."""
    settings = load_dir(config_dir)
    engine = open_store_engine(database_url or settings.core.store.url)
    redactor = Redactor(secrets_of(settings))
    root = logging.getLogger()
    if not root.handlers:  # logging's last-resort handler would print warnings unfiltered
        fallback = logging.StreamHandler()
        fallback.setLevel(logging.WARNING)
        root.addHandler(fallback)
    for handler in root.handlers:
        handler.addFilter(RedactingFilter(redactor))
    deps = Deps(
        settings=settings,
        engine=engine,
        clock=clock,
        tasks=TaskStore(engine),
        audit=SqlAuditSink(engine),
        pending=PendingStore(engine),
        artifacts=ArtifactStore(engine),
        redactor=redactor,
        holder=holder or holder_name(),
    )
    deps.fallback_notify = notify
    features = feature_modules()
    registry = build_tools(deps)
    llm_cfg = settings.core.llm
    llm = LLMClient(llm_cfg, settings.secret(llm_cfg.api_key_env)) if llm_cfg.base_url else None
    agent = Agent(deps, registry, llm)
    app = App(settings, deps, registry, agent, Session(agent))
    for feature in features:
        if hasattr(feature, "install"):
            feature.install(app)
    return app
