"""The feature seam: how a feature plugs into the spine, typed and fixed at construction.

A feature is a `Feature(name, section, install)`. `install(ctx)` builds the feature's objects from
its config section and returns an `Installed`: its tools, chat commands and help lines, loop hooks,
jobs, routes, readiness problems and warnings, and the typed services other features and tools may
use (`Services`, which become fields of `Deps`). `xihe.agent.app` holds `DECLARED`, the one
explicit list (features whose files are absent stay unimported), merges every `Installed` and only then constructs the Registry, Agent and Session.
Nothing is assigned to them afterwards.

What runs later (jobs, routes, startup/shutdown) receives the `Runtime`, the wired bot.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from xihe.agent.deps import Deps, Notify, Services
from xihe.agent.help import HelpEntry
from xihe.agent.hooks import Hooks
from xihe.agent.i18n import Lang
from xihe.agent.loop import Agent
from xihe.agent.registry import Registry, ToolSpec
from xihe.config.settings import Section, Settings

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager
    from pathlib import Path

    from starlette.routing import BaseRoute

    from xihe.agent.session import Handler, Session


T = TypeVar("T")


@dataclass(frozen=True)
class StateKey(Generic[T]):
    """The typed key of one feature's `Installed.state`: the feature's name and the state's type.
    The feature defines it; `Runtime.get(key)` gives the state as that type (None when it is off)."""

    feature: str
    type: type[T]


class Runtime(Protocol):
    """The wired bot, as jobs, routes and lifespan hooks see it (`xihe.agent.app.App`)."""

    settings: Settings
    deps: Deps
    registry: Registry
    agent: Agent
    session: Session
    installed: Installed

    def get(self, key: StateKey[T]) -> T | None:
        """The `Installed.state` of `key`'s feature (None when it is off or keeps none)."""
        ...

    def load_checked(self, directory: str | Path) -> Settings:
        """Load a config directory with every feature's section and build its tool set offline."""
        ...


@dataclass(frozen=True)
class Job:
    """A periodic job; `run` takes the Runtime. All its state lives in the database.

    `follows` marks the jobs that follow what a conversation started (runs, confirmations, the
    alerts a run raised): a `xihe chat` process runs those too while it lives, beside any replica.
    """

    id: str
    run: Callable[[Runtime], Any]
    seconds: float
    run_at_start: bool = False
    follows: bool = False


@dataclass(frozen=True)
class Context:
    """What `install` may use: the settings and the spine's Deps (stores, clock, redactor, metrics).

    `offline` is set when only the tool set is wanted (`xihe tools`, `xihe config check`, a reload
    check): build the tools, open nothing. `session()` gives the Session once the app is built (for a
    channel's workers); calling it during install is an error.
    """

    settings: Settings
    deps: Deps
    model: str = ""  # the LLM's model name (e.g. for a tokenizer)
    offline: bool = False
    session: Callable[[], Session] = field(default=lambda: _not_built())


def _not_built() -> Session:
    raise RuntimeError("the Session is built after every feature is installed")


RouteFactory = Callable[[Runtime], "list[BaseRoute]"]
Lifespan = Callable[[Runtime], None]
# an async resource that lives as long as `xihe serve` (entered after `startup`, left before `shutdown`)
ServeContext = Callable[[Runtime], "AbstractAsyncContextManager[None]"]


@dataclass
class Installed:
    """Everything one feature adds (and, merged, what the whole app has)."""

    tools: list[ToolSpec] = field(default_factory=list)
    commands: dict[str, Handler] = field(default_factory=dict)
    private_commands: set[str] = field(default_factory=set)  # their handler records arguments itself
    help: list[HelpEntry] = field(default_factory=list)
    status_lines: list[Callable[[Lang], str]] = field(default_factory=list)  # live lines under /help
    hooks: Hooks = field(default_factory=Hooks)
    jobs: list[Job] = field(default_factory=list)
    routes: list[RouteFactory] = field(default_factory=list)
    startup: list[Lifespan] = field(default_factory=list)
    shutdown: list[Lifespan] = field(default_factory=list)
    reloaded: list[Lifespan] = field(default_factory=list)  # after a config reload was applied
    built: list[Lifespan] = field(default_factory=list)  # once the app is built (e.g. start background work)
    contexts: list[ServeContext] = field(default_factory=list)  # e.g. the MCP session manager's task group
    services: Services = field(default_factory=Services)
    senders: dict[str, Notify] = field(default_factory=dict)  # conversation-id prefix → channel sender
    problems: dict[str, str] = field(default_factory=dict)  # feature → why the replica is not ready
    warnings: dict[str, str] = field(default_factory=dict)  # feature → why it is off (still ready)
    state: object = None  # the feature's own objects, for its jobs and commands (`Runtime.get`)


@dataclass(frozen=True)
class Feature:
    """A feature: its name, its config section (None: no file of its own), how it installs, and the
    names of the tools it adds when it is on (names in access.yaml stay valid while it is off)."""

    name: str
    section: Section[Any] | None
    install: Callable[[Context], Installed]
    tools: tuple[str, ...] = ()


def merge(parts: Iterable[Installed]) -> Installed:
    """One Installed from many, in order; the same command, sender or service twice is an error."""
    out = Installed()
    for part in parts:
        out.tools += part.tools
        for name, handler in part.commands.items():
            if name in out.commands:
                raise ValueError(f"two features define the command /{name}")
            out.commands[name] = handler
        out.private_commands |= part.private_commands
        out.help += part.help
        out.status_lines += part.status_lines
        out.hooks = out.hooks.merge(part.hooks)
        out.jobs += part.jobs
        out.routes += part.routes
        out.startup += part.startup
        out.shutdown += part.shutdown
        out.reloaded += part.reloaded
        out.built += part.built
        out.contexts += part.contexts
        out.services = out.services.merge(part.services)
        for prefix, sender in part.senders.items():
            if prefix in out.senders:
                raise ValueError(f"two features send to conversations {prefix}*")
            out.senders[prefix] = sender
        out.problems.update(part.problems)
        out.warnings.update(part.warnings)
    return out


__all__ = ["Context", "Feature", "Installed", "Job", "Runtime", "StateKey", "merge"]
