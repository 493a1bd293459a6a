"""A real process is SIGKILLed during step k of a 5-step task; `xihe task resume` finishes it.

Steps before k keep exactly one `done` row and are not executed again; step k is recorded as
interrupted and reruns (or, when its effect already happened, is recovered by the tool's lookup);
the side-effect log shows every effect exactly once and the model is never asked twice.
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
from tests.conftest import write_config
from xihe.agent.db import make_engine
from xihe.agent.task_store import TaskStore
from xihe.integrations.fakes.llm_server import ScriptedLLM, call, say

STEPS = 5


def _wait_for(path: Path, proc: subprocess.Popen[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():  # process synchronisation, not a time window
        if proc.poll() is not None:
            raise AssertionError(f"the bot exited early: {proc.stdout.read() if proc.stdout else ''}")
        if time.monotonic() > deadline:
            raise AssertionError(f"step never started: {path}")
        time.sleep(0.02)


@pytest.mark.parametrize(
    ("k", "after_effect"), [(k, False) for k in range(1, STEPS + 1)] + [(3, True), (5, True)]
)
def test_kill_during_step_k_then_resume(tmp_path: Path, llm: ScriptedLLM, k: int, after_effect: bool) -> None:
    llm.add(*[call("effect_step", step=i) for i in range(1, STEPS + 1)], say("all five done"))
    cfg = write_config(tmp_path / "cfg", llm_url=llm.base_url)
    db = f"sqlite:///{tmp_path / 'xihe.db'}"
    env = {**os.environ, "XIHE_DATABASE_URL": db, "PYTHONPATH": pythonpath(), "XIHE_TEST_BLOCK_STEP": str(k)}
    if after_effect:
        env["XIHE_TEST_BLOCK_AFTER_EFFECT"] = "1"
    cli = [sys.executable, "-m", "xihe.agent.cli.main", "--config", str(cfg)]
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
    proc.stdin.write("do the five steps\n")
    proc.stdin.flush()
    _wait_for(tmp_path / (f"effected-{k}" if after_effect else f"started-{k}"), proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)

    env.pop("XIHE_TEST_BLOCK_STEP")
    resumed = subprocess.run(
        [*cli, "task", "resume", "1"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "task 1 done: all five done" in resumed.stdout

    rows = TaskStore(make_engine(db)).steps(1)
    by_key: dict[str, list[str]] = {}
    for r in rows:
        by_key.setdefault(r.step_key, []).append(r.status)
    for i in range(1, k):
        assert by_key[f"tool:{i}:0"] == ["running", "done"], (i, by_key)  # not executed again
    interrupted = by_key[f"tool:{k}:0"]
    assert interrupted[:2] == ["running", "failed"]  # the kill is on record
    assert interrupted[-1] == "done" and interrupted.count("done") == 1
    for i in range(k + 1, STEPS + 1):
        assert by_key[f"tool:{i}:0"] == ["running", "done"]
    effects = [json.loads(line)["key"] for line in (tmp_path / "effects.jsonl").read_text().splitlines()]
    assert effects == [f"1:tool:{i}:0" for i in range(1, STEPS + 1)]  # each effect exactly once, in order
    recovered = next(r for r in rows if r.step_key == f"tool:{k}:0" and r.status == "done")
    assert ("found" in (recovered.output_text or "")) is after_effect  # lookup found it instead of rerunning
    assert len(llm.requests) == STEPS + 1  # no model turn was asked twice
    llm.assert_consumed()
