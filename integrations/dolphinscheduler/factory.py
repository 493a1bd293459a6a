"""Build a DolphinClient from `config/dolphin.yaml` and the environment."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import tenacity

from xihe.config.dolphin import DolphinConfig, credentials
from xihe.integrations.dolphinscheduler.client import DolphinClient


def client_from_config(
    cfg: DolphinConfig,
    env: Mapping[str, str] | None = None,
    *,
    wait: tenacity.wait.wait_base | None = None,
    count_request: Callable[[], object] | None = None,
    token: str | None = None,
) -> DolphinClient:
    """A client with the configured URL, profile, credentials (from env, or `token`: a user's own),
    timeouts and retries; `count_request` counts every response it receives."""
    creds = {"token": token} if token else credentials(cfg, env)
    return DolphinClient(
        cfg.base_url,
        version=cfg.version,
        timeout=cfg.timeout_seconds,
        retries=cfg.retries,
        wait=wait,
        server_timezone=cfg.server_timezone,
        page_size=cfg.page_size,
        token=creds.get("token"),
        user=creds.get("user"),
        password=creds.get("password"),
        count_request=count_request,
    )
