"""Notifiers: one module per channel kind, found by the `KIND` it declares.

A channel notifier module defines `KIND` (a value of config/alerts.py `Channel.kind`), `MARKUP` (the
text format the pipeline renders for it, render.MARKUPS), a class with `kind`, `markup`, `ready` and
`send` (base.Notifier) and `make(config, env)` building it. Adding a
channel kind is that module plus the kind value in config; nothing here or in deliver.py changes.
E-mail (email.py) is the fallback of every channel, not a kind.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from types import ModuleType
from typing import TYPE_CHECKING

from xihe.agent.alerts.notify.base import Notifier

if TYPE_CHECKING:
    from xihe.config.alerts import AlertsConfig


def _modules() -> list[ModuleType]:
    found = []
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(module, "KIND"):
            found.append(module)
    return found


def channel_notifiers(config: AlertsConfig, env: Mapping[str, str]) -> dict[str, Notifier]:
    """kind → notifier, one per channel kind module."""
    return {m.KIND: m.make(config, env) for m in _modules()}


def kind_markups() -> dict[str, str]:
    """kind → the markup its messages are rendered in (before the outbox)."""
    return {m.KIND: m.MARKUP for m in _modules()}
