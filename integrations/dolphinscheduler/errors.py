"""The errors of talking to DolphinScheduler, and which DS error codes mean "definition not online".

    DolphinError(code, retryable)
    ├── DolphinAuthError        HTTP 401 (empty body) or 10013 bad credentials
    ├── DefinitionOffline       50004, or 50014/10000 whose message says "online"
    └── StartOutcomeUnknown     a start timed out or got a 5xx: it may have happened; look for the marker

The transport (transport.py) raises them; callers catch them by class.
"""

from __future__ import annotations

from xihe.agent.errors import DolphinError

OFFLINE_CODES = frozenset({50004})
OFFLINE_IF_MESSAGE_CODES = frozenset({50014, 10000})


class DolphinAuthError(DolphinError):
    """Authentication failed: missing/expired token or session (HTTP 401) or bad credentials (10013)."""


class DefinitionOffline(DolphinError):
    """The workflow definition (or a sub-workflow) is not ONLINE, so DS refused to start it."""


class StartOutcomeUnknown(DolphinError):
    """A start request failed in a way that may still have started the run; search by marker."""


def is_offline_error(code: int | None, message: str) -> bool:
    """Whether a DS error means "definition not online" across versions."""
    if code in OFFLINE_CODES:
        return True
    return code in OFFLINE_IF_MESSAGE_CODES and "online" in message.lower()
