"""Factories for the alert tests: events, configs and a pipeline over in-memory stores."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.alerts.feature_support import alerts_app, sinks  # noqa: F401  (fixtures of the feature tests)
from xihe.agent.alert_event import AlertEvent
from xihe.agent.alerts.outbox import InMemoryOutbox
from xihe.agent.alerts.pipeline import Pipeline
from xihe.agent.alerts.state import InMemoryAlertStateStore
from xihe.config.access import AccessConfig
from xihe.config.alerts import AlertsConfig
from xihe.config.workflows import WorkflowsConfig

T0 = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _template_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Compiled templates (agent/alerts/tplcache.py) go to a cache of the session, not the user's."""
    monkeypatch.setenv("XIHE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "xihe-cache"))


PRODUCTION = AccessConfig().production_environments()  # {'prod'}: access.yaml's default
WORKFLOWS = WorkflowsConfig.model_validate(
    {
        "workflows": [
            {
                "name": "order_sync",
                "project": "etl",
                "code": 1001,
                "environment": "prod",
                "core": True,
                "oncall": ["zhangsan", "lisi"],
                "channel": "prod",
            },
            {"name": "daily_sales", "project": "etl", "code": 1002, "environment": "prod"},
            {"name": "profile_test", "project": "sandbox", "code": 2001, "environment": "test"},
            {"name": "report_export", "project": "etl", "code": 1003, "environment": "prod", "tier": "P2"},
            {
                "name": "pinned_p0",
                "project": "sandbox",
                "code": 2002,
                "environment": "test",
                "tier": "P0",
                "oncall": ["wangwu"],
            },
        ]
    }
)


def event(**kw: Any) -> AlertEvent:
    """A final failure of profile_test (task t1 failed, no retries) unless overridden."""
    base: dict[str, Any] = {
        "at": T0,
        "project": "sandbox",
        "workflow": "profile_test",
        "workflow_code": 2001,
        "instance_id": 1,
        "state": "FAILURE",
        "task": "t1",
        "host": "10.0.0.1:1234",
        "error": "Connection refused to 10.9.9.9:5432",
        "environment": "test",
    }
    base.update(kw)
    return AlertEvent(**base)


def config(**kw: Any) -> AlertsConfig:
    """Alerts config with test-friendly defaults (no hold, two channels)."""
    data: dict[str, Any] = {
        "instance_wait_seconds": 0,
        "channels": {
            "default": {"robot_key_env": "XIHE_ROBOT_KEY"},
            "prod": {"robot_key_env": "XIHE_ROBOT_KEY_PROD"},
        },
    }
    data.update(kw)
    return AlertsConfig.model_validate(data)


@pytest.fixture
def make_pipeline() -> Callable[..., Pipeline]:
    """Pipeline over fresh (or given) in-memory stores."""

    def make(
        cfg: AlertsConfig | None = None,
        state: InMemoryAlertStateStore | None = None,
        outbox: InMemoryOutbox | None = None,
        **kw: Any,
    ) -> Pipeline:
        return Pipeline(
            cfg or config(),
            WORKFLOWS,
            state or InMemoryAlertStateStore(),
            outbox or InMemoryOutbox(),
            **{"production": PRODUCTION, **kw},
        )

    return make
