"""The composition root: `DECLARED`, the one list of features, and `build_app`, which wires one bot.

`build_app` loads the config (the core sections plus every feature's section), opens the store,
installs every feature against the spine's Deps, merges what they return, and only then constructs
the Registry, the Agent (with the merged loop hooks) and the Session (with the merged commands and
help). Nothing is assigned to those three afterwards.
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from xihe.agent.artifacts import ArtifactStore
from xihe.agent.audit import SqlAuditSink
from xihe.agent.clock import Clock, utc_now
from xihe.agent.db import open_store_engine
from xihe.agent.deps import Deps, Notify
from xihe.agent.feature import Context, Feature, Installed, StateKey, merge
from xihe.agent.holder import holder_name
from xihe.agent.llm import LLMClient
from xihe.agent.loop import Agent
from xihe.agent.mailbox import Mailbox
from xihe.agent.pending import PendingStore
from xihe.agent.redact import RedactingFilter, Redactor
from xihe.agent.registry import Registry
from xihe.agent.session import Session
from xihe.agent.task_store import TaskStore
from xihe.agent.tool_names import ALERT_TOOLS, CODE_TOOLS, DS_TOOLS, LONGTASK_TOOLS, SHELL_TOOLS
from xihe.agent.toolset import build_tools, offline_deps
from xihe.config.load import Section, Settings, load_dir
from xihe.config.load import secrets_of as secrets_of
from xihe.tools import read_artifact

log = logging.getLogger("xihe")
T = TypeVar("T")

# the spine's own tool: artifacts belong to every task
ARTIFACTS = Feature(
    "artifacts", None, lambda ctx: Installed(tools=[read_artifact.SPEC]), (read_artifact.SPEC.name,)
)


@dataclass(frozen=True)
class Declared:
    """A feature as the composition root knows it before importing it: its module (which defines
    `FEATURE`), the config files of which one must exist for it to do anything (none: always on),
    and the tools it may add (valid names in access.yaml even while it is off; a test checks them
    against the module's own `FEATURE.tools`). A feature whose files are all absent is not imported:
    `xihe chat` on the core files starts without the alerts, code, shell, DolphinScheduler and WeCom
    code (about half of its start-up before)."""

    name: str
    module: str
    files: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()

    def load(self) -> Feature:
        feature: Feature = importlib.import_module(self.module).FEATURE
        return feature

    def wanted(self, directory: Path) -> bool:
        return not self.files or any((directory / f).exists() for f in self.files)


# the one explicit list, in install order (commands, help lines and hooks keep this order)
DECLARED: tuple[Declared, ...] = (
    Declared("web", "xihe.agent.web.feature"),
    Declared("shell", "xihe.agent.shell.feature", ("shell.yaml",), SHELL_TOOLS),
    Declared("alerts", "xihe.agent.alerts.feature", ("alerts.yaml",), ALERT_TOOLS),
    Declared("oncall", "xihe.agent.oncall.feature", ("oncall.yaml",)),
    Declared("code", "xihe.agent.code.feature", ("code.yaml",), CODE_TOOLS),
    Declared("dolphin", "xihe.agent.dolphin.feature", ("dolphin.yaml", "alerts.yaml"), DS_TOOLS),
    Declared("wecom", "xihe.agent.wecom.feature", ("wecom.yaml",)),
    Declared("ops", "xihe.agent.ops.feature"),
    Declared("longtask", "xihe.agent.longtask.feature", ("longtask.yaml",), LONGTASK_TOOLS),
    Declared("mcp", "xihe.agent.mcp.feature", ("mcp.yaml",)),  # its tools are named by mcp.yaml
)


def all_features() -> tuple[Feature, ...]:
    """Every feature, imported (config checks of every section, tests)."""
    return (ARTIFACTS, *(d.load() for d in DECLARED))


def features_for(directory: str | Path) -> tuple[Feature, ...]:
    """The features a config directory can turn on: those with no file of their own, and those one of
    whose files is there (the rest are off and stay unimported)."""
    root = Path(directory)
    return (ARTIFACTS, *(d.load() for d in DECLARED if d.wanted(root)))


def sections(features: tuple[Feature, ...] | None = None) -> list[Section[Any]]:
    """The config sections the features declare (what `load_dir` accepts beside the core files)."""
    return [f.section for f in (features or all_features()) if f.section is not None]


def declared_tools(features: tuple[Feature, ...] = ()) -> list[str]:
    """Every tool name a feature may add (valid in the config even while its feature is off or not
    imported), with those of any extra features."""
    names = [name for d in DECLARED for name in d.tools]
    return names + [name for f in features for name in f.tools if name not in names]


def load_config(directory: str | Path, features: tuple[Feature, ...] | None = None) -> Settings:
    """Load and validate a config directory with these features' sections (default: those it turns on)."""
    return load_dir(directory, sections(features or features_for(directory)))


def check_config(
    directory: str | Path, features: tuple[Feature, ...] | None = None
) -> tuple[Settings, Registry]:
    """What `xihe config check`, `xihe tools` and a reload run: load, then build the tool set offline."""
    features = features or features_for(directory)
    settings = load_config(directory, features)
    return settings, offline_registry(settings, features)


def offline_registry(settings: Settings, features: tuple[Feature, ...] | None = None) -> Registry:
    """The registry the model would receive, built over an in-memory store with nothing opened."""
    features = features or features_for(settings.directory)
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
    features: tuple[Feature, ...] = ()

    def get(self, key: StateKey[T]) -> T | None:
        """The `Installed.state` of `key`'s feature (None when it is off or keeps none)."""
        state = self.states.get(key.feature)
        if state is not None and not isinstance(state, key.type):
            raise TypeError(
                f"the {key.feature} feature keeps a {type(state).__name__}, not {key.type.__name__}"
            )
        return state

    def load_checked(self, directory: str | Path) -> Settings:
        """Load a config directory with this app's features (and any its files now turn on) and build
        its tool set offline."""
        extra = tuple(f for f in self.features if f not in features_for(directory))
        settings, _registry = check_config(directory, (*features_for(directory), *extra))
        return settings


def build_app(
    config_dir: str | Path = "config",
    *,
    clock: Clock = utc_now,
    notify: Notify | None = None,
    database_url: str | None = None,
    holder: str | None = None,
    features: tuple[Feature, ...] | None = None,
    listen: str = "127.0.0.1",
) -> App:
    """Load config, open (and migrate) the store, install the features (default: those its files turn
    on), then build the loop once."""
    features = features or features_for(config_dir)
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
    app = App(settings, deps, registry, agent, session, installed, states, features)
    for hook in installed.built:  # e.g. MCP listings that arrive in the background join the registry
        hook(app)
    return app
