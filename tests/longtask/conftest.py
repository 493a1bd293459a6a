"""A bot with the long-task feature on: the shipped longtask.yaml plus per-test overrides."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import write_config
from xihe.agent.app import App, build_app
from xihe.agent.clock import FakeClock
from xihe.integrations.fakes.llm_server import ScriptedLLM, Step

PLUGINS = ["tests.support.tools:SPECS", "tests.longtask.tools:SPECS"]
LOOP = {"max_turns": 20, "max_tool_calls": 30}


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    for k, v in extra.items():
        base[k] = _merge(base.get(k, {}), v) if isinstance(v, dict) else v
    return base


@pytest.fixture
def make_lt(tmp_path: Path, llm: ScriptedLLM, clock: FakeClock, sqlite_url: str) -> Callable[..., App]:
    """make_lt(script, db=, longtask={...}, core={...}) → App; call again with the same db = a restart."""
    counter = {"n": 0}

    def make(
        script: list[Step] | None = None,
        *,
        db: str | None = None,
        longtask: dict[str, Any] | None = None,
        core: dict[str, Any] | None = None,
    ) -> App:
        counter["n"] += 1
        if script:
            llm.add(*script)
        overrides = {"plugins": PLUGINS, "loop": dict(LOOP), **(core or {})}
        cfg = write_config(
            tmp_path / f"lt{counter['n']}",
            llm_url=llm.base_url,
            overrides=overrides,
            files=("xihe.yaml", "access.yaml", "longtask.yaml"),
        )
        lt_file = cfg / "longtask.yaml"
        data = _merge(yaml.safe_load(lt_file.read_text()), longtask or {})
        lt_file.write_text(yaml.safe_dump(data, allow_unicode=True))
        app = build_app(cfg, clock=clock, database_url=db or sqlite_url, holder=f"lt-{counter['n']}")
        app.agent.sleep = waits.append  # back-off waits are recorded, never slept
        return app

    waits: list[float] = []
    make.waits = waits  # type: ignore[attr-defined]
    return make
