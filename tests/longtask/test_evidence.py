"""Evidence is checked by kind: a DS run must exist and be SUCCESS, an artifact must match, a command must exit 0."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
import tenacity

from xihe.agent.app import App
from xihe.agent.errors import ToolFailed
from xihe.agent.registry import ToolContext
from xihe.integrations.dolphinscheduler.client import DolphinClient
from xihe.integrations.dolphinscheduler.sim import DolphinSimulator, Scenario, SimDefinition, SimProject
from xihe.tools.longtask.evidence import check, exit_code_of

ETL = 1000000000001


@pytest.fixture
def sim() -> Iterator[DolphinSimulator]:
    s = DolphinSimulator(
        [
            SimProject(
                "etl",
                ETL,
                [
                    SimDefinition("order_sync", 2000000000001),
                    SimDefinition(
                        "broken_sync", 2000000000003, scenario=Scenario(kind="fail", max_retry_times=0)
                    ),
                ],
            )
        ]
    ).start()
    yield s
    threading.Thread(target=s.stop, daemon=True).start()


@pytest.fixture
def app(make_lt: Callable[..., App]) -> App:
    return make_lt()


@dataclass
class Dolphin:
    """What the evidence check reads of the DolphinScheduler service: its client."""

    client: DolphinClient


def _ctx(app: App, user: str = "alice") -> ToolContext:
    task = app.deps.tasks.create(kind="chat", owner=user, conversation="c", goal="g", now=app.deps.clock())
    return ToolContext(app.deps, task.id, "tool:9:0", user, "c", app.deps.clock())


def test_a_dolphin_instance_must_exist_and_be_success(app: App, sim: DolphinSimulator) -> None:
    ctx = _ctx(app)
    with pytest.raises(ToolFailed, match="not configured"):
        check({"kind": "dolphin_instance", "project_code": ETL, "instance_id": 1}, ctx)
    app.deps.dolphin = Dolphin(DolphinClient(sim.url, token=sim.token, wait=tenacity.wait_none(), timeout=5))
    good = sim.run_directly("order_sync")
    bad = sim.run_directly("broken_sync")
    with pytest.raises(ToolFailed, match="RUNNING_EXECUTION, not SUCCESS"):
        check({"kind": "dolphin_instance", "project_code": ETL, "instance_id": good.id}, ctx)
    sim.advance(3600)
    checked = check({"kind": "dolphin_instance", "project_code": ETL, "instance_id": good.id}, ctx)
    assert checked["checked"]["state"] == "SUCCESS" and checked["instance_id"] == good.id
    with pytest.raises(ToolFailed, match="FAILURE, not SUCCESS"):
        check({"kind": "dolphin_instance", "project_code": ETL, "instance_id": bad.id}, ctx)
    with pytest.raises(ToolFailed, match="could not be checked"):
        check({"kind": "dolphin_instance", "project_code": ETL, "instance_id": 999999}, ctx)


def test_an_artifact_must_exist_belong_to_the_owner_and_match_its_sha256(app: App) -> None:
    ctx = _ctx(app)
    ref = app.deps.artifacts.put("the record", ctx.now, task_id=ctx.task_id, step_key="s", owner="alice")
    digest = hashlib.sha256(b"the record").hexdigest()
    assert check({"kind": "artifact", "artifact_id": ref.id, "sha256": digest}, ctx)["sha256"] == digest
    with pytest.raises(ToolFailed, match="does not match"):
        check({"kind": "artifact", "artifact_id": ref.id, "sha256": "0" * 64}, ctx)
    with pytest.raises(ToolFailed, match="does not exist"):
        check({"kind": "artifact", "artifact_id": "nope", "sha256": digest}, ctx)
    other = app.deps.artifacts.put("bob's", ctx.now, owner="bob")
    with pytest.raises(ToolFailed, match="someone else"):
        check({"kind": "artifact", "artifact_id": other.id, "sha256": other.sha256}, ctx)


def test_a_command_step_must_have_exited_zero(app: App) -> None:
    ctx = _ctx(app)
    tasks, now = app.deps.tasks, ctx.now
    tasks.record(ctx.task_id, "tool:1:0", "run_check", "done", now, output_text='{"exit_code": 0}')
    tasks.record(ctx.task_id, "tool:2:0", "run_check", "done", now, output_text='{"exit_code": 2}')
    tasks.record(ctx.task_id, "tool:3:0", "echo", "done", now, output_text='{"echo": "exit_code 0"}')
    tasks.record(ctx.task_id, "tool:4:0", "run_check", "failed", now, output_text="ERROR", error="boom")
    assert check({"kind": "command", "step": "tool:1:0"}, ctx)["checked"]["exit_code"] == 0
    with pytest.raises(ToolFailed, match="exited with code 2"):
        check({"kind": "command", "step": "tool:2:0"}, ctx)
    with pytest.raises(ToolFailed, match="no exit code"):
        check({"kind": "command", "step": "tool:3:0"}, ctx)  # text that merely mentions exit codes
    with pytest.raises(ToolFailed, match="did not finish"):
        check({"kind": "command", "step": "tool:4:0"}, ctx)
    with pytest.raises(ToolFailed, match="no step"):
        check({"kind": "command", "step": "tool:7:0"}, ctx)
    other = _ctx(app)
    with pytest.raises(ToolFailed, match="no step"):
        check({"kind": "command", "step": "tool:1:0"}, other)  # only this task's own steps count


@pytest.mark.parametrize("evidence", [{"kind": "text", "note": "done, trust me"}, {"done": True}, {}])
def test_free_text_alone_is_refused(app: App, evidence: dict) -> None:
    with pytest.raises(ToolFailed, match="Free text is not evidence"):
        check(evidence, _ctx(app))


def test_exit_codes_are_read_from_json_fields_or_the_shell_header_only() -> None:
    assert exit_code_of('{"exit_code": 0, "stdout": ""}') == 0
    assert exit_code_of('{"exit_code": true}') is None
    assert exit_code_of("$ git_log: exit code 0 in 0.1s [sandbox: bwrap]\nstdout:\n...") == 0
    assert exit_code_of("$ make_test: exit code 1 in 3.0s [sandbox: bwrap]") == 1
    assert exit_code_of("the log says exit code 0 somewhere") is None
