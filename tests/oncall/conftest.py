"""A bot with a test rotation: alice, bob and 李四 (lisi) take weekly shifts from Monday 2026-11-30
10:00 Asia/Shanghai (order_sync's team); carol and alice take daily shifts in the reporting team
(Europe/Berlin); daily_sales has no team and pages its own list."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import CORE_FILES, write_config
from xihe.agent.app import App, build_app
from xihe.agent.clock import FakeClock
from xihe.integrations.fakes.llm_server import ScriptedLLM

ONCALL = {
    "timezone": "Asia/Shanghai",
    "max_override_hours": 48,
    "rotations": {
        "data": {
            "members": ["alice", "bob", "lisi"],
            "every": "weekly",
            "handoff": "10:00",
            "start": "2026-11-30",
        },
        "reports": {
            "members": ["carol", "alice"],
            "every": "daily",
            "handoff": "09:30",
            "timezone": "Europe/Berlin",
            "start": "2026-12-01",
        },
    },
}

OnCallApp = Callable[..., App]


@pytest.fixture
def oncall_app(tmp_path: Path, llm: ScriptedLLM, clock: FakeClock, sqlite_url: str) -> OnCallApp:
    """`oncall_app(db=None, **oncall_yaml_overrides)`: a bot with workflows.yaml and this oncall.yaml."""
    counter = {"n": 0}

    def make(db: str | None = None, **over: Any) -> App:
        counter["n"] += 1
        directory = write_config(
            tmp_path / f"oncall-config{counter['n']}",
            llm_url=llm.base_url,
            files=(*CORE_FILES, "workflows.yaml"),
        )
        access = yaml.safe_load((directory / "access.yaml").read_text())
        access["users"]["lisi"] = {"roles": ["viewer"], "name": "李四"}
        (directory / "access.yaml").write_text(yaml.safe_dump(access, allow_unicode=True))
        workflows = yaml.safe_load((directory / "workflows.yaml").read_text())
        for wf in workflows["workflows"]:
            if wf["name"] == "order_sync":
                wf["team"] = "data"
            if wf["name"] == "daily_sales":
                wf["oncall"] = ["wangwu"]
        (directory / "workflows.yaml").write_text(yaml.safe_dump(workflows, allow_unicode=True))
        (directory / "oncall.yaml").write_text(yaml.safe_dump({**ONCALL, **over}, allow_unicode=True))
        return build_app(
            directory, clock=clock, database_url=db or sqlite_url, holder=f"oncall-{counter['n']}"
        )

    return make
