"""The bot is SIGKILLed after DolphinScheduler accepted a start and before the step was recorded.

A real `xihe chat` process asks, gets `/confirm`, and sends the start; the simulator (in this test
process) accepts it but holds the HTTP answer, and the test kills the bot as soon as the start is
in. `xihe task resume` then finds the run by its startParams marker instead of starting another:
the simulator ends with exactly one instance, and the step is recorded as recovered.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.child_env import pythonpath
from tests.dolphin.conftest import seed
from tests.dolphin.support import write_ds_config
from xihe.agent.app import build_app
from xihe.agent.clock import FakeClock, utc_now
from xihe.agent.db import make_engine
from xihe.agent.dolphin.feature import poll_watches
from xihe.agent.task_store import TaskStore
from xihe.integrations.dolphinscheduler.sim import DolphinSimulator
from xihe.integrations.fakes.llm_server import ScriptedLLM, call, say
from xihe.tools.dolphin.store import SqlWatchStore


def _wait_for_start(sim: DolphinSimulator, proc: subprocess.Popen[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not sim.starts:  # process synchronisation, not a time window
        if proc.poll() is not None:
            raise AssertionError(f"the bot exited early: {proc.stdout.read() if proc.stdout else ''}")
        if time.monotonic() > deadline:
            raise AssertionError("the bot never sent the start")
        time.sleep(0.02)


@pytest.mark.parametrize(("version", "consumed"), [("3.2", True), ("3.3", True), ("3.2", False)])
def test_kill_after_ds_accepted_the_start_then_resume_finds_it(
    tmp_path: Path, llm: ScriptedLLM, version: str, consumed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm.add(call("trigger_dolphinscheduler", workflow="long_sync", dates="昨天"), say("long_sync started"))
    # the bot subprocess runs on the real clock: the simulator's clock starts there too
    sim = DolphinSimulator(seed(), version=version, clock=FakeClock(utc_now())).start()
    try:
        cfg = write_ds_config(tmp_path / "cfg", sim, llm_url=llm.base_url)
        db = f"sqlite:///{tmp_path / 'xihe.db'}"
        env = {**os.environ, "XIHE_DATABASE_URL": db, "PYTHONPATH": pythonpath(), "XIHE_DS_TOKEN": sim.token}
        cli = [sys.executable, "-m", "xihe.agent.cli.main", "--config", str(cfg)]
        sim.slow("/executors/start-", 120)  # accept the start, then hold the answer
        proc = subprocess.Popen(
            [*cli, "chat", "--user", "alice"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            cwd=tmp_path,
        )
        assert proc.stdin is not None
        proc.stdin.write("把 long_sync 补跑一下昨天的\n/confirm\n")
        proc.stdin.flush()
        _wait_for_start(sim, proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)

        steps = TaskStore(make_engine(db)).steps(1)
        assert [(s.step_key, s.status) for s in steps if s.step_key.startswith("tool")] == [
            ("tool:1:0", "running")  # DS has the run; the bot had not recorded it
        ]
        if consumed:
            sim.advance(5)  # 3.2: the master consumes the start command and creates the instance

        resumed = subprocess.run(
            [*cli, "task", "resume", "1"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120
        )
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert "task 1 done: long_sync started" in resumed.stdout
        if not consumed:
            # 3.2 before the master created the instance: the marker cannot be found yet, and starting
            # again could make a second run. The step records an uncertain start and watches the marker.
            assert sim.instances_of("long_sync") == [] and len(sim.starts) == 1
            row = [s for s in TaskStore(make_engine(db)).steps(1) if s.step_key == "tool:1:0"][-1]
            assert row.status == "done" and json.loads(row.output_text or "{}")["status"] == "start_uncertain"
            monkeypatch.setenv("XIHE_DS_TOKEN", sim.token)
            app = build_app(cfg, clock=sim.clock, database_url=db, holder="poller")
            for _ in range(4):  # the master creates the instance; the poller finds it by its marker
                sim.advance(15)
                poll_watches(app)
            (instance,) = sim.instances_of("long_sync")
            watch = app.deps.dolphin.watches.get("1:tool:1:0")
            assert watch is not None and list(watch.instance_ids) == [instance.id]
            assert len(sim.starts) == 1
            app.deps.engine.dispose()
            llm.assert_consumed()
            return

        (instance,) = sim.instances_of("long_sync")  # exactly one run
        assert len(sim.starts) == 1
        assert json.loads(sim.starts[0]["startParams"]) == {
            "xihe_run": "1:tool:1:0",
            "xihe_requested_by": "alice",
        }
        rows = [s for s in TaskStore(make_engine(db)).steps(1) if s.step_key == "tool:1:0"]
        assert [r.status for r in rows] == ["running", "failed", "running", "done"]
        assert "interrupted" in (rows[1].error or "")
        result = json.loads(rows[-1].output_text or "{}")
        assert result["status"] == "already_started" and result["instance_ids"] == [instance.id]
        watch = SqlWatchStore(make_engine(db)).get("1:tool:1:0")
        assert watch is not None and watch.conversation == "cli:alice" and not watch.done
        assert len(llm.requests) == 2  # the model was not asked again for the first turn
        llm.assert_consumed()
    finally:
        sim.stop()


@pytest.mark.parametrize("version", ["3.1", "3.2"])
def test_kill_before_the_start_reached_ds_is_told_with_the_retry_not_done(
    tmp_path: Path, llm: ScriptedLLM, version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm.add(call("trigger_dolphinscheduler", workflow="long_sync", dates="2026-11-30"), say("started"))
    sim = DolphinSimulator(seed(), version=version, clock=FakeClock(utc_now())).start()
    try:
        cfg = write_ds_config(tmp_path / "cfg", sim, llm_url=llm.base_url)
        db = f"sqlite:///{tmp_path / 'xihe.db'}"
        env = {**os.environ, "XIHE_DATABASE_URL": db, "PYTHONPATH": pythonpath(), "XIHE_DS_TOKEN": sim.token}
        cli = [sys.executable, "-m", "xihe.agent.cli.main", "--config", str(cfg)]
        sim.drop("/executors/start-", 30)  # the start never reaches DS: the bot dies first
        proc = subprocess.Popen(
            [*cli, "chat", "--user", "alice"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            cwd=tmp_path,
        )
        assert proc.stdin is not None
        proc.stdin.write("backfill long_sync for 2026-11-30\n/confirm\n")
        proc.stdin.flush()
        deadline = time.monotonic() + 60
        while not any("/executors/start-" in r.path for r in sim.server.requests):
            assert time.monotonic() < deadline and proc.poll() is None, "the bot never sent the start"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert sim.starts == []  # DS has nothing

        resumed = subprocess.run(
            [*cli, "task", "resume", "1"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120
        )
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert sim.starts == []  # 3.1/3.2 cannot tell "not yet created" from "never sent": no second start

        monkeypatch.setenv("XIHE_DS_TOKEN", sim.token)
        sent: list[tuple[str, str]] = []
        app = build_app(
            cfg, clock=sim.clock, database_url=db, holder="poller", notify=lambda c, t: sent.append((c, t))
        )
        watch = app.deps.dolphin.watches.get("1:tool:1:0")
        assert watch is not None
        for _ in range(80):  # past the discovery timeout (one hour)
            sim.advance(60)
            poll_watches(app)
        (told,) = [t for c, t in sent if c == "cli:alice"]
        assert "long_sync for 2026-11-30 did not run" in told and "Nothing was started" in told
        assert "`/run long_sync 2026-11-30` starts it again" in told
        task = TaskStore(make_engine(db)).get(1)
        assert task.status == "failed" and "never created" in (task.error or "")
        assert sim.instances_of("long_sync") == [] and sim.starts == []
        app.deps.engine.dispose()
    finally:
        sim.stop()


@pytest.mark.parametrize("version", ["3.1", "3.2", "3.3"])
def test_kill_after_a_rerun_reached_a_slow_master_resumes_without_a_second_rerun(
    tmp_path: Path, version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sim = DolphinSimulator(seed(), version=version, clock=FakeClock(utc_now())).start()
    try:
        failed = sim.run_directly("broken_sync", schedule=None)
        sim.advance(600)
        assert failed.state == "FAILURE"
        cfg = write_ds_config(tmp_path / "cfg", sim)
        db = f"sqlite:///{tmp_path / 'xihe.db'}"
        env = {**os.environ, "XIHE_DATABASE_URL": db, "PYTHONPATH": pythonpath(), "XIHE_DS_TOKEN": sim.token}
        cli = [sys.executable, "-m", "xihe.agent.cli.main", "--config", str(cfg)]
        sim.slow_master(300)  # the master takes the command minutes later; DS shows FAILURE until then
        sim.slow("/executors/execute", 30)  # DS has the command; the bot dies before the answer
        proc = subprocess.Popen(
            [*cli, "chat", "--user", "alice"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            cwd=tmp_path,
        )
        assert proc.stdin is not None
        proc.stdin.write(f"/rerun {failed.id}\n/confirm\n")
        proc.stdin.flush()
        execute = "POST /dolphinscheduler/projects/{n}/executors/execute"
        deadline = time.monotonic() + 60
        while not sim.counts[execute]:
            assert time.monotonic() < deadline and proc.poll() is None, "the bot never sent the rerun"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert failed.state == "FAILURE" and failed.run_times == 1

        resumed = subprocess.run(
            [*cli, "task", "resume", "1"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120
        )
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert sim.counts[execute] == 1  # not sent again: the master may still take the first one

        monkeypatch.setenv("XIHE_DS_TOKEN", sim.token)
        sent: list[tuple[str, str]] = []
        app = build_app(
            cfg, clock=sim.clock, database_url=db, holder="poller", notify=lambda c, t: sent.append((c, t))
        )
        for _ in range(60):
            sim.advance(15)
            poll_watches(app)
        assert failed.state == "SUCCESS" and failed.run_times == 2 and sim.counts[execute] == 1
        told = [t for c, t in sent if c == "cli:alice"]
        assert [t[:2] for t in told if t[0] in "✅❌"] == ["✅ "]
        app.deps.engine.dispose()
    finally:
        sim.stop()
