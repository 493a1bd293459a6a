"""Operations in-process: retention pruning, config reload (a bad reload keeps the last good config and
/readyz says why), JSON logs through the redactor, and lease take-over between two replicas."""

from __future__ import annotations

import json
import logging
from datetime import timedelta
from typing import Any

import yaml
from starlette.testclient import TestClient

from tests.conftest import MakeApp
from xihe.agent.alert_tables import alert_outbox
from xihe.agent.audit import AuditEvent
from xihe.agent.clock import FakeClock
from xihe.agent.gate import identify
from xihe.agent.ops import feature as ops
from xihe.agent.ops.reload import reload_config
from xihe.agent.scheduler import _take_orphan, release_leases, renew_leases, resume_orphans
from xihe.agent.web.server import create_server, readiness_body
from xihe.integrations.fakes.llm_server import say
from xihe.integrations.wecom.store import SqlMsgIdStore

FILES = ("xihe.yaml", "access.yaml", "ops.yaml")


def _task(app: Any, status: str, at: Any, **kw: Any) -> int:
    t = app.deps.tasks.create(kind="chat", owner="alice", conversation="cli:alice", goal="g", now=at, **kw)
    app.deps.tasks.record(t.id, "llm:1", "scripted", "done", at, output_text="{}")
    app.deps.tasks.update(t.id, at, status=status)
    return int(t.id)


def test_retention_prunes_only_old_finished_rows(make_app: MakeApp, db_url: str, clock: FakeClock) -> None:
    app = make_app(db=db_url, files=FILES)
    now = clock()
    old = now - timedelta(days=100)
    old_done = _task(app, "done", old)
    old_running = _task(app, "running", old)
    fresh_done = _task(app, "done", now - timedelta(days=2))
    app.deps.audit.record(AuditEvent(at=now - timedelta(days=400), kind="command", actor="a", outcome="x"))
    app.deps.audit.record(AuditEvent(at=now - timedelta(days=10), kind="command", actor="a", outcome="y"))
    inbox = SqlMsgIdStore(app.deps.engine)
    inbox.seen("wecom_app:old", now - timedelta(days=8))
    inbox.seen("wecom_app:new", now - timedelta(hours=1))
    alerts = {"old-sent": (100, "sent"), "old-pending": (100, "pending"), "new-sent": (1, "sent")}
    with app.deps.engine.begin() as conn:
        for key, (age, status) in alerts.items():
            at = now - timedelta(days=age)
            row = {"kind": "instance", "tier": "P1", "channel": "oncall", "subject": "s", "text": "t"}
            conn.execute(
                alert_outbox.insert().values(key=key, created_at=at, due_at=at, status=status, **row)
            )

    counts = ops.prune(app, now)
    assert counts["task"] == 1 and counts["audit_event"] >= 1 and counts["wecom_inbox"] == 1
    assert counts["outbox"] == 1  # only a sent alert past outbox_days; one not yet sent is kept
    with app.deps.engine.connect() as conn:
        assert {r.key for r in conn.execute(alert_outbox.select())} == {"old-pending", "new-sent"}
    remaining = {t.id for t in app.deps.tasks.recent(owner="alice", limit=10)}
    assert remaining == {old_running, fresh_done}
    assert app.deps.tasks.steps(old_done) == []  # steps went with their task
    assert inbox.seen("wecom_app:new", now) is True
    assert inbox.seen("wecom_app:old", now) is False  # forgotten (long outside the replay window)
    assert ops.prune(app, now)["task"] == 0  # idempotent: a second replica finds nothing


def test_reload_applies_good_config_and_keeps_last_good_on_error(make_app: MakeApp) -> None:
    app = make_app(files=FILES)
    client = TestClient(create_server(app, with_scheduler=False))
    directory = app.settings.directory
    assert reload_config(app) == "unchanged"
    access = directory / "access.yaml"
    data = yaml.safe_load(access.read_text())
    data["users"]["erin"] = {"roles": ["viewer"]}
    access.write_text(yaml.safe_dump(data))
    assert reload_config(app) == "applied"
    assert identify("erin", app.deps.settings.access).known

    good = (directory / "xihe.yaml").read_text()
    (directory / "xihe.yaml").write_text(good + "\nloop_typo: 1\n")
    assert reload_config(app) == "refused"
    assert reload_config(app) == "unchanged"  # the same bad files are not re-reported every tick
    assert identify("erin", app.deps.settings.access).known  # last good config still running
    body = client.get("/readyz").json()  # anyone may ask: the reason, not the file or the server's path
    assert body["problems"] == ["config reload refused"] and "xihe.yaml" not in str(body)
    detail, _status = readiness_body(app, detailed=True)  # admins (/ui/readyz) and the log
    assert "xihe.yaml:" in detail["config_reload_error"] and "loop_typo" in detail["config_reload_error"]
    assert str(directory) not in detail["config_reload_error"]  # no absolute server path

    (directory / "xihe.yaml").write_text(good)
    assert reload_config(app) == "unchanged"  # back to what is running
    assert client.get("/readyz").json()["config_reload_error"] is None
    (directory / "xihe.yaml").write_text(good.replace("max_turns: 8", "max_turns: 5"))
    assert reload_config(app) == "applied"
    assert app.deps.settings.core.loop.max_turns == 5
    outcomes = [e["outcome"] for e in app.deps.audit.search(kind="config", limit=10)]
    assert outcomes[:3] == ["reloaded", "reload_refused", "reloaded"]


def test_json_logs_carry_task_ids_and_pass_through_the_redactor() -> None:
    from xihe.agent.redact import Redactor

    fmt = ops.JsonFormatter(Redactor(["s3cr3t-value"]))
    record = logging.LogRecord(
        "xihe.wecom", logging.INFO, __file__, 1, "token is %s", ("s3cr3t-value",), None
    )
    record.task_id = 42
    record.url = "https://x/?access_token=abc123"
    line = json.loads(fmt.format(record))
    assert line["task_id"] == 42 and line["level"] == "INFO" and line["logger"] == "xihe.wecom"
    assert "s3cr3t" not in json.dumps(line) and "abc123" not in json.dumps(line)


def test_orphan_taken_by_exactly_one_replica_after_the_lease(
    make_app: MakeApp, db_url: str, clock: FakeClock
) -> None:
    notes: list[tuple[str, str]] = []
    a = make_app([say("finished by a replica")], db=db_url, notify=lambda c, t: notes.append((c, t)))
    b = make_app(db=db_url, notify=lambda c, t: notes.append((c, t)))
    now = clock()
    lease = timedelta(seconds=a.settings.core.store.lease_seconds)
    tid = a.deps.tasks.create(
        kind="chat",
        owner="alice",
        conversation="cli:alice",
        goal="go",
        now=now,
        lease_owner="otherhost:1",
        lease_until=now + lease,
    ).id
    resume_orphans(b)
    assert a.deps.tasks.get(tid).status == "running" and notes == []  # the holder may be alive

    clock.advance(lease.total_seconds() + 1)
    orphan = a.deps.tasks.orphans(clock())[0]
    assert [_take_orphan(a, orphan), _take_orphan(b, orphan)] == [True, False]  # compare-and-swap
    a.deps.tasks.release(tid, a.deps.holder)
    a.deps.tasks.update(tid, clock(), lease_owner="otherhost:1", lease_until=clock() - timedelta(seconds=1))
    resume_orphans(b)
    resume_orphans(a)  # nothing left, and no "busy" note
    assert notes == [("cli:alice", "finished by a replica")]


def test_live_leases_are_renewed_and_released_on_shutdown(make_app: MakeApp, clock: FakeClock) -> None:
    app = make_app()
    now = clock()
    mine = app.deps.tasks.create(
        kind="chat",
        owner="alice",
        conversation="c",
        goal="g",
        now=now,
        lease_owner=app.deps.holder,
        lease_until=now + timedelta(seconds=10),
    ).id
    clock.advance(5)
    renew_leases(app)
    held = app.deps.tasks.get(mine)
    assert held.lease_until == clock() + timedelta(seconds=app.settings.core.store.lease_seconds)
    assert release_leases(app) == 1
    assert app.deps.tasks.get(mine).lease_owner is None
