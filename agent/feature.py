"""Features plug into the spine through one small interface.

A feature module may define any of:

    tools(app) -> list[ToolSpec]        tools it adds to the registry (built from its config)
    install(app) -> None                services in app.deps.services, chat commands, help lines
    routes(app) -> list[BaseRoute]      HTTP routes served by `xihe serve`
    jobs(app) -> list[Job]              scheduler jobs (APScheduler is only the clock)
    startup(app) / shutdown(app)        `xihe serve` lifespan: start, then stop taking work and hand it over

`FEATURES` is the explicit list; importing it registers nothing by itself.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

FEATURES: tuple[str, ...] = (
    "xihe.agent.web.feature",
    "xihe.agent.shell.feature",
    "xihe.agent.alerts.feature",
    "xihe.agent.code.feature",
    "xihe.agent.dolphin.feature",
    "xihe.agent.wecom.feature",
    "xihe.agent.ops.feature",
    "xihe.agent.longtask.feature",
)


@dataclass(frozen=True)
class Job:
    """A periodic job: `func` is a 'module:function' taking the App; state lives in the database."""

    id: str
    func: str
    seconds: float
    run_at_start: bool = False


def modules() -> list[ModuleType]:
    """Import the feature modules in order."""
    return [importlib.import_module(name) for name in FEATURES]
