"""DolphinScheduler end to end through real processes, on 3.1, 3.2 and 3.3.

Per version: one `xihe serve` and one `xihe chat --user alice` (commands on stdin), sharing a SQLite
store, both running the poll job, against a simulator in this process whose clock a pump thread
moves 200x faster than real time. Whichever process reports a run, alice's chat prints it
(`[xihe → cli:alice] …`). Each test uses its own workflows, so they share the two processes; they
check what a user reads in chat.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cli.terminals import Terminal
from tests.dolphin.conftest import BAD_HOST, seed
from tests.dolphin.support import write_ds_config
from tests.serve.harness import Replica, wait_until
from xihe.agent.clock import FakeClock, utc_now
from xihe.integrations.dolphinscheduler.sim import DolphinSimulator, SimProject

SPEED = 200.0  # simulated seconds per real second
CLIENT_TIMEOUT = 5.0  # the bot's request timeout; a start answer held longer is "lost"


class Chat(Terminal):
    """alice's `xihe chat`: lines in, replies (`xihe> …`) and late messages (`[xihe → cli:alice] …`) out."""

    def __init__(self, cfg: Path, env: dict[str, str], workdir: Path, user: str = "alice") -> None:
        super().__init__(cfg, user, env, workdir)

    def messages(self, head: str) -> list[str]:
        """The messages that start with `head` (replies `xihe> `, late ones `[xihe → cli:alice] `),
        each with its continuation lines."""
        out: list[str] = []
        current: str | None = None
        for line in list(self.lines):
            if line.startswith(("xihe> ", "[xihe → ")):
                current = line[len(head) :] if line.startswith(head) else None
                if current is not None:
                    out.append(current)
            elif current is not None:
                out[-1] += "\n" + line
        return out

    def replies(self) -> list[str]:
        return self.messages("xihe> ")

    def say(self, text: str, timeout: float = 60) -> str:
        """Send one line and return the reply to it."""
        before = len(self.replies())
        self.type(text)
        wait_until(lambda: len(self.replies()) > before, timeout, f"a reply to {text!r}:\n{self.lines}")
        time.sleep(0.05)  # a multi-line reply arrives as one write; let the reader take all of it
        return self.replies()[before]


class Stack:
    """Simulator + pump + `xihe serve` + `xihe chat` for one DolphinScheduler version."""

    def __init__(
        self,
        version: str,
        workdir: Path,
        *,
        projects: list[SimProject] | None = None,
        config: dict[str, dict[str, Any]] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        """`config`: keys to set in a config file ({"dolphin.yaml": {...}}); `env`: more for both processes."""
        self.sim = DolphinSimulator(projects or seed(), version=version, clock=FakeClock(utc_now())).start()
        self._stop = threading.Event()
        self._pump = threading.Thread(target=self._run_pump, daemon=True)
        self._pump.start()
        cfg = write_ds_config(workdir / "cfg", self.sim)
        dolphin = yaml.safe_load((cfg / "dolphin.yaml").read_text())
        dolphin.update(timeout_seconds=CLIENT_TIMEOUT)
        dolphin["poll"] = {"interval_seconds": 0.5, "max_interval_seconds": 1}
        (cfg / "dolphin.yaml").write_text(yaml.safe_dump(dolphin))
        for name, values in (config or {}).items():
            data = yaml.safe_load((cfg / name).read_text())
            data.update(values)
            (cfg / name).write_text(yaml.safe_dump(data, allow_unicode=True))
        db = f"sqlite:///{workdir / 'xihe.db'}"
        self.cfg, self.db = cfg, db
        env = {"XIHE_DS_TOKEN": self.sim.token, **(env or {})}
        self.env = env
        self.serve = Replica(cfg, db, workdir, "serve", env).wait_ready()
        self.chat = Chat(cfg, {"XIHE_DATABASE_URL": db, **env}, workdir)

    def _run_pump(self) -> None:
        while not self._stop.wait(0.01):
            self.sim.advance(SPEED * 0.01)

    def posted(self) -> list[str]:
        """What reached alice's chat outside a reply (from serve or the chat's own poll), one entry per message."""
        return self.chat.messages("[xihe → cli:alice] ")

    def wait_posted(self, pattern: str, count: int = 1, timeout: float = 90) -> list[str]:
        """Until at least `count` posted messages match `pattern` (a regex); returns them."""

        def found() -> list[str]:
            hits = [m for m in self.posted() if re.search(pattern, m)]
            return hits if len(hits) >= count else []

        return list(
            wait_until(found, timeout, f"{count} message(s) matching {pattern!r}:\n{self.chat.lines}")
        )

    def run(self, command: str) -> str:
        """A write command and its /confirm; returns the reply to the /confirm."""
        ask = self.chat.say(command)
        assert "/confirm" in ask, ask
        return self.chat.say("/confirm")

    def close(self) -> None:
        self.chat.close()
        self.serve.terminate()
        self._stop.set()
        self._pump.join(timeout=5)
        threading.Thread(target=self.sim.stop, daemon=True).start()


@pytest.fixture(scope="module", params=["3.1", "3.2", "3.3"])
def stack(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    for var in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "all_proxy"):
        os.environ.pop(var, None)
    s = Stack(str(request.param), tmp_path_factory.mktemp(f"ds{request.param}"))
    try:
        yield s
    finally:
        s.close()


def test_backfill_one_date_and_a_natural_date(stack: Stack) -> None:
    assert "Started **daily_backfill**" in stack.run("/run daily_backfill 2026-11-27")
    stack.wait_posted(r"^✅ daily_backfill instance \d+ for 2026-11-27 ended SUCCESS")
    started = stack.run("/run flaky_sync 昨天")
    # ${system.biz.date} = scheduleTime - 1 day: yesterday's data is scheduleTime today
    days = re.search(r"业务日期 (\S+) → scheduleTime ([0-9-]+)", started)  # told in Chinese: 昨天
    assert days is not None, started
    biz, schedule = days.groups()
    assert (date.fromisoformat(schedule) - date.fromisoformat(biz)).days == 1
    # a task that failed once and succeeded on retry is no failure (told in Chinese: the run was asked for 昨天)
    stack.wait_posted(rf"^✅ flaky_sync 实例 \d+（业务日期 {biz} \(scheduleTime {schedule}\)），已结束：成功")
    assert not [m for m in stack.posted() if m.startswith("❌ flaky_sync")]


def test_a_range_stops_at_a_failed_date_and_a_rerun_goes_on_with_the_chain(stack: Stack) -> None:
    started = stack.run("/run daily_backfill 2026-11-28..2026-11-30")
    assert "business dates 2026-11-28 … 2026-11-30 → scheduleTime 2026-11-28 … 2026-11-30 (3 dates" in started
    stack.wait_posted(r"^✅ daily_backfill instance \d+ for 2026-11-28 ended SUCCESS")
    (failure,) = stack.wait_posted(r"^❌ daily_backfill instance \d+ for 2026-11-29 ended FAILURE")
    assert "task **load** FAILURE on 10.0.0.7:1234" in failure and "SQLException" in failure
    assert "The backfill stopped here: 2026-11-30 (1 date) did not run." in failure
    failed = re.search(r"instance (\d+)", failure)
    assert failed is not None
    assert f"`/rerun {failed.group(1)}`" in failure
    assert "Rerunning the failed tasks" in stack.run(f"/rerun {failed.group(1)}")
    stack.wait_posted(r"^✅ daily_backfill instance \d+ for 2026-11-29 ended SUCCESS")
    stack.wait_posted(r"^✅ daily_backfill instance \d+ for 2026-11-30 ended SUCCESS")
    runs = [
        i for i in stack.sim.instances_of("daily_backfill") if i.schedule_time and i.schedule_time.day >= 28
    ]
    assert [(i.schedule_time.day, i.state) for i in runs if i.schedule_time] == [
        (28, "SUCCESS"),
        (29, "SUCCESS"),
        (30, "SUCCESS"),
    ]


def test_failure_names_task_host_and_error_and_a_slow_master_rerun_ends_in_success(stack: Stack) -> None:
    stack.run("/run broken_sync 2026-11-30")
    (failure,) = stack.wait_posted(r"^❌ broken_sync instance \d+ for 2026-11-30 ended FAILURE")
    assert f"task **load** FAILURE on {BAD_HOST} (retries 1/1)" in failure
    assert "java.sql.SQLException: Connection refused (order_db:3306)" in failure
    (inst,) = stack.sim.instances_of("broken_sync")
    stack.sim.slow_master(600)  # taken about three polls later; DS shows the old FAILURE meanwhile
    assert "Rerunning the failed tasks" in stack.run(f"/rerun {inst.id}")
    stack.wait_posted(rf"^✅ broken_sync instance {inst.id} for 2026-11-30 ended SUCCESS")
    stack.sim.slow_master(None)
    assert inst.run_times == 2
    assert len([m for m in stack.posted() if m.startswith("❌ broken_sync")]) == 1


def test_an_offline_workflow_is_refused(stack: Stack) -> None:
    starts = len(stack.sim.starts)
    reply = stack.chat.say("/run legacy_export 2026-11-30")
    assert "legacy_export" in reply and "OFFLINE" in reply and "/confirm" not in reply
    assert len(stack.sim.starts) == starts


def test_lost_start_reply_status_stop_and_an_expired_token(stack: Stack) -> None:
    stack.sim.slow("/executors/start-", CLIENT_TIMEOUT * 2)  # DS takes the start; its answer is lost
    assert "Start sent, outcome unknown" in stack.run("/run long_sync")
    (progress, *_) = stack.wait_posted(r"^⏳ long_sync instance \d+ RUNNING")
    (inst,) = stack.sim.instances_of("long_sync")  # exactly one run
    assert f"instance {inst.id}" in progress
    assert json.loads(stack.sim.starts[-1]["startParams"])["xihe_run"].endswith(":tool:1:0")

    status = stack.chat.say(f"/status {inst.id}")
    assert status.startswith(f"**long_sync** #{inst.id}: RUNNING") and "/3 tasks" in status

    stack.sim.expire_token()
    (warning,) = stack.wait_posted(r"DolphinScheduler rejects the bot's credentials")
    assert "long_sync" in warning and "XIHE_DS_TOKEN" in warning and stack.sim.token not in warning
    time.sleep(3)  # several more polls: still told only once
    assert len([m for m in stack.posted() if "rejects the bot's credentials" in m]) == 1
    stack.sim.tokens[stack.sim.token] = stack.sim.clock() + timedelta(days=3650)

    assert "Stopping **long_sync**" in stack.run(f"/stop {inst.id}")
    stack.wait_posted(rf"^⏹️ long_sync instance {inst.id} ended STOP")
    assert len(stack.sim.instances_of("long_sync")) == 1
    assert stack.sim.token not in stack.serve.log()
