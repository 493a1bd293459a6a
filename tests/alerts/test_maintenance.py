"""Maintenance windows: cron schedules, fixed windows, /maint on|off, the store."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.alerts.conftest import T0, config, event
from xihe.agent.alerts.maintenance import (
    InMemoryMaintenanceStore,
    MaintenanceBook,
    MaintOff,
    MaintOn,
    MaintScope,
    apply_maint_command,
    parse_maint_command,
)
from xihe.agent.cron import CronSpec
from xihe.agent.errors import ConfigError
from xihe.config.alerts import AlertsConfig
from xihe.config.yamlmodel import load_model


def test_chat_maint_on_scope_and_off():
    cmd = parse_maint_command("/maint on 30m host:10.0.0.1", T0, "alice")
    assert isinstance(cmd, MaintOn) and cmd.window.scope == MaintScope("host", "10.0.0.1")
    book, added, _ = apply_maint_command(MaintenanceBook(), cmd, T0)
    assert book.active(T0 + timedelta(minutes=29), event()) is not None
    assert book.active(T0 + timedelta(minutes=30), event()) is None
    assert book.active(T0, event(host="10.0.0.2:1")) is None
    off = parse_maint_command("/maint off", T0 + timedelta(minutes=1), "alice")
    assert isinstance(off, MaintOff)
    book2, _, removed = apply_maint_command(book, off, T0 + timedelta(minutes=1))
    assert removed == added and book2.active(T0 + timedelta(minutes=2), event()) is None


@pytest.mark.parametrize(
    "text", ["/maint", "/maint on", "/maint on soon", "/maint on 9d", "/maint on 5m project:"]
)
def test_bad_maint_commands_explain_usage(text: str):
    with pytest.raises(ValueError):
        parse_maint_command(text, T0, "alice")


def test_store_round_trip():
    store = InMemoryMaintenanceStore()
    cmd = parse_maint_command("/maint on 2h project:etl", T0, "bob")
    assert isinstance(cmd, MaintOn)
    store.save(cmd.window)
    book = MaintenanceBook.from_config(config(), store.load())
    assert book.active(T0 + timedelta(hours=1), event(project="etl")) is not None
    store.delete(cmd.window.id)
    assert store.load() == []


def test_cron_with_timezone_and_workflow_scope():
    cfg = config(
        timezone="Asia/Shanghai",
        maintenance=[
            {
                "name": "n",
                "cron": "0 17 * * 1-5",
                "duration_minutes": 30,
                "scope": {"kind": "workflow", "value": "profile_test"},
            }
        ],
    )
    book = MaintenanceBook.from_config(cfg)
    # T0 is Wednesday 09:00 UTC = 17:00 Shanghai
    assert book.active(T0 + timedelta(minutes=10), event()) == "n"
    assert book.active(T0 + timedelta(minutes=10), event(workflow="other")) is None
    assert book.active(T0 + timedelta(minutes=31), event()) is None


@pytest.mark.parametrize(
    ("expr", "problem"), [("* * *", "5 fields"), ("61 * * * *", "outside"), ("*/0 * * * *", "step")]
)
def test_bad_cron_is_rejected(expr: str, problem: str):
    with pytest.raises(ValueError, match=problem):
        CronSpec.parse(expr)


def test_bad_schedule_in_yaml_names_file_and_line():
    text = "maintenance:\n  - name: x\n    cron: '0 2 * *'\n    duration_minutes: 10\n"
    with pytest.raises(ConfigError) as err:
        load_model(text, "alerts.yaml", AlertsConfig)
    assert str(err.value).startswith("alerts.yaml:2: maintenance[name=x]") and "5 fields" in str(err.value)
