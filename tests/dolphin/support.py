"""Helpers for the DolphinScheduler chat tests: a bot configured against a running DolphinSimulator."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import CORE_FILES, write_config
from xihe.agent.app import App, build_app
from xihe.agent.clock import Clock
from xihe.agent.dolphin.feature import poll_watches
from xihe.agent.inbound import Inbound
from xihe.integrations.dolphinscheduler.sim import DolphinSimulator
from xihe.tools.dolphin.watch import Watch

WORKFLOWS = {
    "timezone": "Asia/Shanghai",
    "workflows": [
        {
            "name": "order_sync",
            "project": "etl",
            "aliases": ["订单同步"],
            "environment": "prod",
            "core": True,
        },
        {
            "name": "broken_sync",
            "project": "etl",
            "aliases": ["坏任务"],
            "environment": "test",
            "biz_date_offset": 0,  # keyed on ${system.biz.curdate}: scheduleTime is the business date
        },
        {"name": "long_sync", "project": "etl", "environment": "test"},
        {"name": "legacy_export", "project": "etl", "environment": "test"},
        {"name": "flaky_sync", "project": "etl", "environment": "test"},
        # its simulated failure is keyed on a scheduleTime (2026-11-29): business date = scheduleTime
        {"name": "daily_backfill", "project": "etl", "environment": "test", "biz_date_offset": 0},
    ],
}


def write_ds_config(
    directory: Path, sim: DolphinSimulator, *, llm_url: str = "", extra: dict[str, Any] | None = None
) -> Path:
    """xihe.yaml + access.yaml + dolphin.yaml (pointing at `sim`) + workflows.yaml (+ `extra` files)."""
    cfg = write_config(directory, llm_url=llm_url, files=CORE_FILES)
    dolphin = {
        "base_url": sim.url,
        "version": sim.version,
        "token_env": "XIHE_DS_TOKEN",
        "server_timezone": "UTC",
        "timeout_seconds": 10,
        "retries": 0,
        "poll": {"interval_seconds": 15, "max_interval_seconds": 120},
    }
    (cfg / "dolphin.yaml").write_text(yaml.safe_dump(dolphin))
    (cfg / "workflows.yaml").write_text(yaml.safe_dump(WORKFLOWS, allow_unicode=True))
    for name, data in (extra or {}).items():
        (cfg / name).write_text(yaml.safe_dump(data, allow_unicode=True))
    return cfg


@dataclass
class Bot:
    """A bot wired to a simulator, with everything it posted to conversations."""

    app: App
    sim: DolphinSimulator
    sent: list[tuple[str, str]] = field(default_factory=list)

    def say(self, user: str, text: str, conversation: str | None = None) -> str:
        return self.app.session.handle(Inbound(user, conversation or f"cli:{user}", text, "cli"))

    def watch(self, key: str) -> Watch | None:
        svc: Any = self.app.deps.dolphin
        found: Watch | None = svc.watches.get(key)
        return found

    def poll_until_done(self, key: str, step: float = 15, limit: float = 7200) -> None:
        """Move the simulated clock (shared with the bot) and run the poll job until the watch ends."""
        elapsed = 0.0
        while elapsed < limit:
            w = self.watch(key)
            assert w is not None, f"no watch {key}"
            if w.done:
                return
            self.sim.advance(step)
            elapsed += step
            poll_watches(self.app)
        raise AssertionError(f"watch {key} still running after {limit} s")

    def messages(self, conversation: str, prefix: str = "") -> list[str]:
        return [t for c, t in self.sent if c == conversation and t.startswith(prefix)]


def make_bot(
    directory: Path,
    sim: DolphinSimulator,
    clock: Clock,
    db: str,
    *,
    llm_url: str = "",
    holder: str = "bot",
    extra: dict[str, Any] | None = None,
) -> Bot:
    """Build a bot over `sim` (set XIHE_DS_TOKEN to sim.token first)."""
    cfg = write_ds_config(directory, sim, llm_url=llm_url, extra=extra)
    sent: list[tuple[str, str]] = []
    app = build_app(cfg, clock=clock, database_url=db, holder=holder, notify=lambda c, t: sent.append((c, t)))
    return Bot(app, sim, sent)


def ask_id(reply: str) -> int:
    """The pending action id in a confirmation prompt."""
    return int(reply.split("`/confirm ")[1].split("`")[0])
