"""DolphinScheduler integration: REST client (3.1-3.3), typed rows, run helpers.

The names below are loaded on first use (PEP 562), so importing a light submodule such as
`states` (the alert replay, the webhook's parser) does not import the client, `requests` and the
settings it needs.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from xihe.agent.errors import DolphinError
    from xihe.integrations.dolphinscheduler.client import DolphinClient
    from xihe.integrations.dolphinscheduler.errors import (
        DefinitionOffline,
        DolphinAuthError,
        StartOutcomeUnknown,
        is_offline_error,
    )
    from xihe.integrations.dolphinscheduler.models import (
        MARKER_KEY,
        Definition,
        Instance,
        Page,
        Project,
        StartResult,
        TaskRun,
    )

_WHERE = {
    "DolphinError": "xihe.agent.errors",
    "DolphinClient": "xihe.integrations.dolphinscheduler.client",
    "DefinitionOffline": "xihe.integrations.dolphinscheduler.errors",
    "DolphinAuthError": "xihe.integrations.dolphinscheduler.errors",
    "StartOutcomeUnknown": "xihe.integrations.dolphinscheduler.errors",
    "is_offline_error": "xihe.integrations.dolphinscheduler.errors",
    **dict.fromkeys(
        ("MARKER_KEY", "Definition", "Instance", "Page", "Project", "StartResult", "TaskRun"),
        "xihe.integrations.dolphinscheduler.models",
    ),
}

__all__ = [
    "MARKER_KEY",
    "Definition",
    "DefinitionOffline",
    "DolphinAuthError",
    "DolphinClient",
    "DolphinError",
    "Instance",
    "Page",
    "Project",
    "StartOutcomeUnknown",
    "StartResult",
    "TaskRun",
    "is_offline_error",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
