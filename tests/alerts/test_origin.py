"""Who started a run: the alert says it when the bot did (ds_watch + task + pending_action rows)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import insert

from tests.alerts.conftest import config, event
from xihe.agent.alerts.model import Tier
from xihe.agent.alerts.notes import RunOrigin, instance_note
from xihe.agent.alerts.render import Renderer
from xihe.agent.alerts.state import InstanceState
from xihe.agent.core_tables import pending_action
from xihe.agent.db import open_store_engine
from xihe.agent.dolphin.origin import SqlRunOrigins
from xihe.agent.task_store import TaskStore
from xihe.tools.dolphin.store import SqlWatchStore
from xihe.tools.dolphin.watch import Watch

NOW = datetime(2026, 12, 2, 9, tzinfo=UTC)


def test_a_bot_started_backfill_names_who_asked_and_who_approved(tmp_path: Path) -> None:
    engine = open_store_engine(f"sqlite:///{tmp_path / 'x.db'}")
    task = TaskStore(engine).create(kind="chat", owner="alice", conversation="c1", goal="补数", now=NOW)
    SqlWatchStore(engine).add(
        Watch(
            key=f"{task.id}:start",
            task_id=str(task.id),
            conversation="c1",
            project="etl",
            project_code=7,
            workflow="order_sync",
            definition_code=1001,
            started_at=NOW,
            next_poll_at=NOW,
            expected_runs=3,
            instance_ids=(555, 556),
        )
    )
    with engine.begin() as conn:
        conn.execute(
            insert(pending_action).values(
                task_id=task.id,
                step_key="s1",
                user_id="alice",
                conversation="c1",
                tool="trigger_dolphinscheduler",
                args_json='{"workflow": "order_sync", "dates": "2026-12-01..2026-12-03"}',
                args_digest="d",
                reason="prod write",
                needs_approval=True,
                status="confirmed",
                approved_by="bob",
                expires_at=NOW + timedelta(minutes=15),
                created_at=NOW,
                updated_at=NOW,
            )
        )
    origins = SqlRunOrigins(engine)
    assert origins.find(556) == RunOrigin(str(task.id), "alice", "bob", True, 7)
    assert origins.find(999) is None  # not a run of the bot

    cfg = config(
        public_base_url="https://xihe.example.com/",
        dolphinscheduler_instance_url="http://ds:12345/dolphinscheduler/ui/projects/{project_code}/workflow/instances/{instance_id}",
    )
    inst = InstanceState(556, "held", Tier.P1, "default", NOW, (event(instance_id=556),))
    note = instance_note(Renderer(), cfg, inst, None, "test", origins.find(556), NOW, "inst:556:P1:default")
    assert "发起：xihe，alice 发起，bob 批准（补数）" in note.text
    assert "[运行详情](https://xihe.example.com/ui/runs/556)" in note.text  # the run page links the task
    assert (
        "[DolphinScheduler 实例](http://ds:12345/dolphinscheduler/ui/projects/7/workflow/instances/556)"
        in note.text
    )
    other = instance_note(Renderer(), cfg, inst, None, "test", None, NOW, "k")
    assert "非 xihe 发起" in other.text and "DolphinScheduler 实例" not in other.text  # no project code known
