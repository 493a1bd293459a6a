"""Fixtures of the MCP tests: real `xihe serve` processes (tests/serve) and the WeCom fake."""

from __future__ import annotations

from tests.serve.conftest import fake_wecom, start_replica

__all__ = ["fake_wecom", "start_replica"]
