"""The composition root: `FEATURES`, the one list of features, and `build_app`, which wires one bot.

`build_app` loads the config (the core sections plus every feature's section), opens the store,
installs every feature against the spine's Deps, merges what they return, and only then constructs
the Registry, the Agent (with the merged loop hooks) and the Session (with the merged commands and
help). Nothing is assigned to those three afterwards.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from xihe.agent.alerts.feature import FEATURE as ALERTS
from xihe.agent.artifacts import ArtifactStore
from xihe.agent.audit import SqlAuditSink
from xihe.agent.clock import Clock, utc_now
from xihe.agent.code.feature import FEATURE as CODE
from xihe.agent.db import open_store_engine
from xihe.agent.deps import Deps, Notify
from xihe.agent.dolphin.feature import FEATURE as DOLPHIN
from xihe.agent.feature import Context, Feature, Installed, StateKey, merge
from xihe.agent.holder import holder_name
from xihe.agent.llm import LLMClient
from xihe.agent.longtask.feature import FEATURE as LONGTASK
from xihe.agent.loop import Agent
from xihe.agent.mailbox import Mailbox
from xihe.agent.mcp.feature import FEATURE as MCP
from xihe.agent.oncall.feature import FEATURE as ONCALL
from xihe.agent.ops.feature import FEATURE as OPS
from xihe.agent.pending import PendingStore
from xihe.agent.redact import RedactingFilter, Redactor
from xihe.agent.registry import Registry
from xihe.agent.session import Session
from xihe.agent.shell.feature import FEATURE as SHELL
from xihe.agent.task_store import TaskStore
from xihe.agent.toolset import build_tools, offline_deps
from xihe.agent.web.feature import FEATURE as WEB
from xihe.agent.wecom.feature import FEATURE as WECOM
from xihe.config.load import Section, Settings, load_dir
from xihe.config.load import secrets_of as secrets_of
from xihe.tools import read_artifact

log = logging.getLogger("xihe")
T = TypeVar("T")

# the spine's own tool: artifacts belong to every task
ARTIFACTS = Feature(
    "artifacts", None, lambda ctx: Installed(tools=[read_artifact.SPEC]), (read_artifact.SPEC.name,)
)

# the one explicit list, in install order (commands, help lines and hooks keep this order)
FEATURES: tuple[Feature, ...] = (
    ARTIFACTS, WEB, SHELL, ALERTS, ONCALL, CODE, DOLPHIN, WECOM, OPS, LONGTASK, MCP
)  # fmt: skip


def sections(features: tuple[Feature, ...] = FEATURES) -> list[Section[Any]]:
    """The config sections the features declare (what `load_dir` accepts beside the core files)."""
    return [f.section for f in features if f.section is not None]


def declared_tools(features: tuple[Feature, ...] = FEATURES) -> list[str]:
    """Every tool name the features may add (valid in the config even while its feature is off)."""
    return [name for f in features for name in f.tools]


def load_config(directory: str | Path, features: tuple[Feature, ...] = FEATURES) -> Settings:
    """Load and validate a config directory with these features' sections."""
    return load_dir(directory, sections(features))


def check_config(
    directory: str | Path, features: tuple[Feature, ...] = FEATURES
) -> tuple[Settings, Registry]:
    """What `xihe config check`, `xihe tools` and a reload run: load, then build the tool set offline."""
    settings = load_config(directory, features)
    return settings, offline_registry(settings, features)


def offline_registry(settings: Settings, features: tuple[Feature, ...] = FEATURES) -> Registry:
    """The registry the model would receive, built over an in-memory store with nothing opened."""
    ctx = Context(settings, offline_deps(settings), model=settings.core.llm.model, offline=True)
    return build_tools(settings, merge(f.install(ctx) for f in features).tools, declared_tools(features))


@dataclass
class App:
    """A wired bot."""

    settings: Settings
    deps: Deps
    registry: Registry
    agent: Agent
    session: Session
    installed: Installed
    states: dict[str, object]
    features: tuple[Feature, ...] = FEATURES

    def get(self, key: StateKey[T]) -> T | None:
        """The `Installed.state` of `key`'s feature (None when it is off or keeps none)."""
        state = self.states.get(key.feature)
        if state is not None and not isinstance(state, key.type):
            raise TypeError(
                f"the {key.feature} feature keeps a {type(state).__name__}, not {key.type.__name__}"
            )
        return state

    def load_checked(self, directory: str | Path) -> Settings:
        """Load a config directory with this app's features and build its tool set offline."""
        settings, _registry = check_config(directory, self.features)
        return settings


def build_app(
    config_dir: str | Path = "config",
    *,
    clock: Clock = utc_now,
    notify: Notify | None = None,
    database_url: str | None = None,
    holder: str | None = None,
    features: tuple[Feature, ...] = FEATURES,
    listen: str = "127.0.0.1",
) -> App:
    """Load config, open (and migrate) the store, install the features, then build the loop once."""
    settings = load_config(config_dir, features)
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
        # conversations no channel claims are terminal chats: their mail waits in the store
        fallback_notify=notify if notify is not None else Mailbox(engine, clock).post,
        listen=listen,
    )
    llm_cfg = settings.core.llm
    llm = LLMClient(llm_cfg, settings.secret(llm_cfg.api_key_env)) if llm_cfg.base_url else None
    built: list[Session] = []

    def session_once_built() -> Session:
        if not built:
            raise RuntimeError("the Session is built after every feature is installed")
        return built[0]

    model = llm.cfg.model if llm is not None else llm_cfg.model
    ctx = Context(settings, deps, model=model, session=session_once_built)
    parts = [(f.name, f.install(ctx)) for f in features]
    installed = merge(part for _name, part in parts)
    deps.provide(installed.services, installed.senders)
    registry = build_tools(settings, installed.tools, declared_tools(features))
    agent = Agent(deps, registry, llm, installed.hooks)
    session = Session(
        agent,
        installed.commands,
        installed.help,
        private_commands=installed.private_commands,
        status_lines=installed.status_lines,
    )
    built.append(session)
    states = {name: part.state for name, part in parts if part.state is not None}
    return App(settings, deps, registry, agent, session, installed, states, features)
