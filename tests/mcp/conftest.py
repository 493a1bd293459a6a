"""Fixtures of the MCP tests: real `xihe serve` processes and the WeCom fake (tests/serve), and a bot
with web pages (tests/ui)."""

from __future__ import annotations

from tests.serve.conftest import fake_wecom, start_replica
from tests.ui.conftest import ui_bot

__all__ = ["fake_wecom", "start_replica", "ui_bot"]
