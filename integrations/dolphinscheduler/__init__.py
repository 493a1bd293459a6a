"""DolphinScheduler integration: REST client (3.1-3.3), typed rows, run helpers."""

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
