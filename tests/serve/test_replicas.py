"""Two `xihe serve` replicas on one PostgreSQL: WeCom retries landing on the other replica are handled
once, and a replica SIGKILLed in the middle of a task is finished by the other. No duplicate replies."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import requests

from tests.conftest import PG_URL, reset_postgres
from tests.serve.harness import AGENT_ID, Replica, serve_config, wait_until
from xihe.integrations.fakes.llm_server import ScriptedLLM, call, say, slow
from xihe.integrations.wecom.fake import FakeWeCom

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg_url() -> str:
    reset_postgres(PG_URL)
    return PG_URL


def _finals(fake: FakeWeCom, user: str) -> list[str]:
    return [m for m in fake.contents(user) if not m.startswith("⏳")]


def _handled(replicas: list[Replica]) -> float:
    return sum(
        r.metric("xihe_messages_total", channel="wecom_app", kind=kind)
        for r in replicas
        for kind in ("command", "chat")
    )


def test_the_same_msgid_on_both_replicas_runs_once(
    tmp_path: Path, pg_url: str, fake_wecom: FakeWeCom, start_replica: Callable[..., Replica]
) -> None:
    cfg = serve_config(tmp_path / "cfg", fake_wecom, lease_seconds=5)
    r1, r2 = start_replica(cfg, pg_url, "r1"), start_replica(cfg, pg_url, "r2")
    sender = r1.app_sender()
    # WeCom retries one callback (same MsgId, fresh signature) and the load balancer picks the other replica
    q1, b1 = sender.app_envelope(sender.app_text_xml("alice", "/tasks", 7, AGENT_ID), AGENT_ID)
    q2, b2 = sender.app_envelope(sender.app_text_xml("alice", "/tasks", 7, AGENT_ID), AGENT_ID)
    assert requests.post(r1.url + "/wecom/callback", params=q1, data=b1, timeout=10).status_code == 200
    assert requests.post(r2.url + "/wecom/callback", params=q2, data=b2, timeout=10).status_code == 200

    # and a storm: 10 deliveries of another message, 5 per replica, all at once
    q, b = sender.app_envelope(sender.app_text_xml("bob", "/tasks", 8, AGENT_ID), AGENT_ID)
    statuses: list[int] = []
    threads = [
        threading.Thread(
            target=lambda url=r.url: statuses.append(
                requests.post(url + "/wecom/callback", params=q, data=b, timeout=10).status_code
            )
        )
        for r in (r1, r2) * 5
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert statuses == [200] * 10
    wait_until(lambda: fake_wecom.contents("alice") and fake_wecom.contents("bob"), what="both replies")
    wait_until(lambda: _handled([r1, r2]) == 2, what="metrics")
    assert fake_wecom.contents("alice") == ["You have no tasks yet."]
    assert fake_wecom.contents("bob") == ["You have no tasks yet."]
    assert _handled([r1, r2]) == 2


def test_a_replica_killed_mid_task_is_finished_by_the_other(
    tmp_path: Path,
    pg_url: str,
    llm: ScriptedLLM,
    fake_wecom: FakeWeCom,
    start_replica: Callable[..., Replica],
) -> None:
    llm.add(*[call("effect_step", step=i) for i in (1, 2, 3)], say("all three steps done"))
    cfg = serve_config(tmp_path / "cfg", fake_wecom, llm_url=llm.base_url, lease_seconds=5)
    doomed = start_replica(cfg, pg_url, "r1", env={"XIHE_TEST_BLOCK_STEP": "2"})
    survivor = start_replica(cfg, pg_url, "r2")

    assert doomed.app_sender().post_app_text("alice", "do the three steps", 1, AGENT_ID).status_code == 200
    wait_until(lambda: (tmp_path / "started-2").exists(), what="step 2 to start on r1")
    assert (tmp_path / "started-2").read_text() == str(doomed.proc.pid)
    doomed.kill()

    finals = wait_until(lambda: _finals(fake_wecom, "alice"), timeout=90, what="the survivor's answer")
    assert finals == ["all three steps done"]
    assert (tmp_path / "started-3").exists()
    effects = [json.loads(line)["key"] for line in (tmp_path / "effects.jsonl").read_text().splitlines()]
    assert effects == ["1:tool:1:0", "1:tool:2:0", "1:tool:3:0"]  # each side effect exactly once
    llm.assert_consumed()  # no model turn asked twice
    # the survivor says nothing more: one final answer, no "busy" notes
    survivor.terminate()
    assert _finals(fake_wecom, "alice") == ["all three steps done"]


def test_a_replica_killed_while_its_model_pool_waits_on_the_model_is_finished_once_by_the_other(
    tmp_path: Path,
    pg_url: str,
    llm: ScriptedLLM,
    fake_wecom: FakeWeCom,
    start_replica: Callable[..., Replica],
) -> None:
    # the first request never comes back in time (its replica dies); the survivor asks again
    llm.add(slow(say("never delivered"), 60), say("the one answer"))
    cfg = serve_config(tmp_path / "cfg", fake_wecom, llm_url=llm.base_url, lease_seconds=5)
    doomed = start_replica(cfg, pg_url, "r1")
    assert (
        doomed.app_sender().post_app_text("alice", "what failed last night?", 1, AGENT_ID).status_code == 200
    )
    wait_until(lambda: llm.requests, what="r1's model request")
    doomed.kill()  # mid model call: the turn's step is `running`, the task leased to r1
    survivor = start_replica(cfg, pg_url, "r2")

    finals = wait_until(lambda: _finals(fake_wecom, "alice"), timeout=90, what="the survivor's answer")
    assert finals == ["the one answer"]
    assert len(llm.requests) == 2  # asked again once (a model call has no side effect), not more
    survivor.terminate()
    assert _finals(fake_wecom, "alice") == ["the one answer"]
