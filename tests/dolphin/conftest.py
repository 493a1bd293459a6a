"""Fixtures: a seeded DolphinSimulator per API version and clients talking to it over loopback HTTP."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import tenacity

from tests.dolphin.support import Bot, make_bot
from xihe.agent.clock import FakeClock
from xihe.integrations.dolphinscheduler import DolphinClient
from xihe.integrations.dolphinscheduler.sim import DolphinSimulator, Scenario, SimDefinition, SimProject
from xihe.integrations.fakes.llm_server import ScriptedLLM

ETL, DW = 1000000000001, 1000000000002
ORDER_SYNC, FLAKY, BROKEN, LONG, WAITING, OFFLINE, BACKFILL = (
    2000000000001,
    2000000000002,
    2000000000003,
    2000000000004,
    2000000000005,
    2000000000006,
    2000000000007,
)
DW_SALES, DW_BROKEN = 2000000000011, 2000000000012
BAD_HOST = "10.0.0.9:1234"


def seed() -> list[SimProject]:
    """Projects and definitions used across the DolphinScheduler tests."""
    return [
        SimProject(
            "etl",
            ETL,
            [
                SimDefinition("order_sync", ORDER_SYNC),
                SimDefinition(
                    "flaky_sync", FLAKY, scenario=Scenario(kind="retry_then_success", max_retry_times=2)
                ),
                SimDefinition(
                    "broken_sync", BROKEN, scenario=Scenario(kind="fail", max_retry_times=1, host=BAD_HOST)
                ),
                SimDefinition("long_sync", LONG, scenario=Scenario(kind="long_running")),
                SimDefinition(
                    "queued_sync", WAITING, scenario=Scenario(wait_state="SERIAL_WAIT", wait_seconds=600)
                ),
                SimDefinition("legacy_export", OFFLINE, online=False),
                SimDefinition(
                    "daily_backfill",
                    BACKFILL,
                    scenario=Scenario(fail_dates=frozenset({"2026-11-29"}), task_seconds=30),
                ),
            ],
        ),
        SimProject(
            "dw",
            DW,
            [
                SimDefinition("dw_sales", DW_SALES),
                SimDefinition(
                    "dw_broken", DW_BROKEN, scenario=Scenario(kind="fail", max_retry_times=0, host=BAD_HOST)
                ),
            ],
        ),
    ]


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(params=["3.1", "3.2", "3.3"])
def version(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_sim() -> Iterator[Callable[..., DolphinSimulator]]:
    started: list[DolphinSimulator] = []

    def make(version: str = "3.2", projects: list[SimProject] | None = None, **kw: Any) -> DolphinSimulator:
        sim = DolphinSimulator(projects or seed(), version=version, **kw).start()
        started.append(sim)
        return sim

    yield make
    for sim in started:
        # LoopbackServer.shutdown waits out serve_forever's 0.5 s poll; do it off the test's clock
        threading.Thread(target=sim.stop, daemon=True).start()


@pytest.fixture
def sim(make_sim: Callable[..., DolphinSimulator], version: str) -> DolphinSimulator:
    return make_sim(version)


def client_for(sim: DolphinSimulator, **kw: Any) -> DolphinClient:
    """A client that does not sleep between retries."""
    kw.setdefault("token", sim.token)
    kw.setdefault("wait", tenacity.wait_none())
    kw.setdefault("timeout", 5.0)
    return DolphinClient(sim.url, **kw)


@pytest.fixture
def client(sim: DolphinSimulator) -> DolphinClient:
    return client_for(sim, version=sim.version)


@pytest.fixture
def bot_for(
    tmp_path: Path,
    clock: FakeClock,
    make_sim: Callable[..., DolphinSimulator],
    llm: ScriptedLLM,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Callable[..., Bot]]:
    """Factory: a bot on a fresh simulator sharing the test's FakeClock."""
    made: list[Bot] = []

    def make(
        version: str = "3.3",
        db: str | None = None,
        *,
        with_llm: bool = True,
        extra: dict[str, Any] | None = None,
    ) -> Bot:
        sim = make_sim(version, clock=clock)
        monkeypatch.setenv("XIHE_DS_TOKEN", sim.token)
        bot = make_bot(
            tmp_path / f"cfg{len(made)}",
            sim,
            clock,
            db or f"sqlite:///{tmp_path / 'xihe.db'}",
            llm_url=llm.base_url if with_llm else "",
            extra=extra,
        )
        made.append(bot)
        return bot

    yield make
    for bot in made:
        bot.app.deps.engine.dispose()
