"""The failed-run scan end to end: DolphinSimulator over HTTP → scan job → pipeline → robot sink, on a FakeClock."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.alerts.feature_support import KEY, KEY_PROD, Sinks, merge, run_jobs
from tests.alerts.test_replicas import delivered_exactly_once
from tests.conftest import REPO
from tests.dolphin.support import write_ds_config
from xihe.agent.app import App, build_app
from xihe.agent.clock import FakeClock
from xihe.agent.dolphin.feature import poll_watches
from xihe.agent.dolphin.scan import ScanResult
from xihe.agent.dolphin.scan_marks import mark_key
from xihe.agent.dolphin.sources import SCANNER, scan_failed_runs
from xihe.agent.errors import ConfigError
from xihe.agent.inbound import Inbound
from xihe.agent.scheduler import all_jobs, run_job
from xihe.integrations.dolphinscheduler.sim import DolphinSimulator, Scenario, SimDefinition, SimProject

ETL, DW = 1000000000001, 1000000000002
HOST = "10.0.0.21:1234"
WORKFLOWS = {
    "timezone": "Asia/Shanghai",
    "workflows": [
        {
            "name": "order_sync",
            "project": "etl",
            "environment": "prod",
            "core": True,
            "oncall": ["zhangsan"],
            "channel": "prod",
        },
        {"name": "broken_sync", "project": "etl", "environment": "test"},
        {"name": "long_sync", "project": "etl", "environment": "test"},
        {"name": "dw_broken", "project": "dw", "environment": "test"},
    ],
}


def seed() -> list[SimProject]:
    fail = Scenario(kind="fail", max_retry_times=0, host=HOST)
    return [
        SimProject(
            "etl",
            ETL,
            [
                SimDefinition("order_sync", 2000000000001, scenario=fail),
                SimDefinition("broken_sync", 2000000000003, scenario=fail),
                SimDefinition("long_sync", 2000000000004, scenario=Scenario(kind="long_running")),
            ],
        ),
        SimProject("dw", DW, [SimDefinition("dw_broken", 2000000000012, scenario=fail)]),
    ]


@dataclass
class ScanBot:
    """A bot with dolphin.yaml (→ the simulator) and alerts.yaml (→ the sinks), scan on or off."""

    app: App
    sim: DolphinSimulator
    sent: list[tuple[str, str]] = field(default_factory=list)

    def say(self, user: str, text: str) -> str:
        return self.app.session.handle(Inbound(user, f"cli:{user}", text, "cli"))

    def scan(self) -> ScanResult:
        result = scan_failed_runs(self.app)
        assert result is not None
        return result

    def records(self) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = self.app.deps.alerts.records.rows()
        return [r for r in rows if r["kind"] == "decision"]

    def requests(self, part: str) -> int:
        return sum(n for k, n in self.sim.counts.items() if part in k)

    def metric(self, name: str, labels: dict[str, str] | None = None) -> float:
        return self.app.deps.metrics.registry.get_sample_value(name, labels or {}) or 0.0


@pytest.fixture
def ds_sim(clock: FakeClock, request: pytest.FixtureRequest) -> Iterator[DolphinSimulator]:
    version = getattr(request, "param", "3.3")
    sim = DolphinSimulator(seed(), version=version, clock=clock).start()
    yield sim
    threading.Thread(target=sim.stop, daemon=True).start()  # shutdown waits out a 0.5 s poll


ScanBots = Callable[..., ScanBot]


@pytest.fixture
def scan_bot(
    tmp_path: Path, clock: FakeClock, ds_sim: DolphinSimulator, sinks: Sinks, monkeypatch: pytest.MonkeyPatch
) -> Iterator[ScanBots]:
    monkeypatch.setenv("XIHE_DS_TOKEN", ds_sim.token)
    made: list[ScanBot] = []

    def make(db: str, *, holder: str = "", scan: dict[str, Any] | None = None) -> ScanBot:
        shipped = yaml.safe_load((REPO / "config" / "alerts.yaml").read_text())
        alerts = merge(
            shipped,
            {
                "instance_wait_seconds": 10,
                "maintenance": [],
                "delivery": {"robot_base_url": sinks.robot.url, "timeout_seconds": 2, "tries_per_run": 1},
                "smtp": {
                    "host": sinks.smtp.host,
                    "port": sinks.smtp.port,
                    "starttls": False,
                    "admins": ["a@t"],
                },
            },
        )
        if scan is not None:
            alerts["scan"] = scan
        cfg = write_ds_config(
            tmp_path / f"cfg{len(made)}",
            ds_sim,
            extra={"alerts.yaml": alerts, "workflows.yaml": WORKFLOWS},
        )
        sent: list[tuple[str, str]] = []
        app = build_app(
            cfg,
            clock=clock,
            database_url=db,
            holder=holder or f"bot-{len(made)}",
            notify=lambda c, t: sent.append((c, t)),
        )
        bot = ScanBot(app, ds_sim, sent)
        made.append(bot)
        return bot

    yield make
    for bot in made:
        bot.app.deps.engine.dispose()


SCAN_ON = {"enabled": True, "projects": ["etl"], "interval_seconds": 60, "lookback_minutes": 30}


def test_a_failed_cron_run_alerts_once_and_a_rescan_sends_nothing(
    scan_bot: ScanBots, sinks: Sinks, clock: FakeClock, db_url: str
) -> None:
    bot = scan_bot(db_url, scan=SCAN_ON)
    assert "alerts_scan" in {j.id for j in all_jobs(bot.app)}
    cron = bot.sim.run_directly("order_sync", marker="")  # a scheduler run: the bot did not start it
    other = bot.sim.run_directly("dw_broken")  # fails too, but project dw is not scanned
    bot.sim.advance(300)
    assert bot.sim.instances[cron.id].state == "FAILURE" and bot.sim.instances[other.id].state == "FAILURE"

    first = bot.scan()
    assert first.reported == [cron.id] and first.errors == []
    (event,) = first.events
    assert (event.source, event.workflow, event.project, event.environment) == (
        "scan",
        "order_sync",
        "etl",
        "prod",
    )
    assert (event.failed_task, event.host, event.failed_task_state) == ("load", HOST, "FAILURE")
    assert "SQLException" in event.error and "SQLException" in event.log_tail
    (record,) = bot.records()
    assert (record["instance_id"], record["reason"], record["tier"]) == (cron.id, "new_instance", "P0")

    clock.advance(11)  # the instance message is held 10 s for sibling tasks
    bot.sim.advance(0)
    run_jobs(bot.app)
    (message,) = sinks.robot_texts(KEY_PROD)
    assert "order_sync" in message and str(cron.id) in message and HOST in message
    assert "<@zhangsan>" in message and "SQLException" in message
    assert sinks.robot_texts(KEY) == []

    # the next scans see the same run in their window: nothing is read again, nothing is sent
    details = bot.requests("/tasks") + bot.requests("/log/")
    for _ in range(3):
        clock.advance(60)
        again = bot.scan()
        assert again.reported == [] and again.skipped["already_reported"] == 1
        run_jobs(bot.app)
    assert bot.requests("/tasks") + bot.requests("/log/") == details
    assert len(bot.records()) == 1 and len(sinks.robot_texts(KEY_PROD)) == 1
    clock.advance(minutes=30)  # the run has left the look-back window
    assert bot.scan().skipped["ended_before_window"] == 1

    assert bot.metric("xihe_ds_scan_requests_total") >= 5
    assert bot.metric("xihe_ds_scan_instances_total", {"outcome": "reported"}) == 1
    assert bot.metric("xihe_ds_scan_instances_total", {"outcome": "already_reported"}) == 3
    run_job(bot.app, {j.id: j for j in all_jobs(bot.app)}["alerts_scan"])  # through the scheduler's runner
    assert bot.metric("xihe_job_runs_total", {"job": "alerts_scan", "outcome": "ok"}) == 1


@pytest.mark.parametrize("ds_sim", ["3.1", "3.2", "3.3"], indirect=True)
def test_the_bots_own_run_is_not_reported_twice_and_stops_are_not_reported(
    scan_bot: ScanBots, sinks: Sinks, clock: FakeClock, sqlite_url: str
) -> None:
    bot = scan_bot(sqlite_url, scan=SCAN_ON)
    bot.say("alice", "/run broken_sync")
    assert "Started **broken_sync**" in bot.say("alice", "/confirm")
    long = bot.sim.run_directly("long_sync")
    bot.sim.advance(300)  # broken_sync has failed; the poller has not looked yet
    bot.app.deps.dolphin.client.stop(ETL, long.id)
    bot.sim.advance(30)
    (own,) = bot.sim.instances_of("broken_sync")
    assert own.state == "FAILURE" and bot.sim.instances[long.id].state == "STOP"

    early = bot.scan()
    assert early.reported == [] and early.events == []
    # 3.2/3.3 list rows carry the bot's marker; 3.1 rows do not, so the run waits for its watch to find it
    assert early.skipped == ({"discovering": 1} if bot.sim.version == "3.1" else {"watched": 1})

    poll_watches(bot.app)  # the watcher reports its own run
    (fed,) = bot.records()
    assert (fed["instance_id"], fed["reason"], fed["tier"]) == (own.id, "new_instance", "P1")
    late = bot.scan()
    assert late.reported == [] and late.skipped == {"watched": 1}
    clock.advance(11)
    bot.sim.advance(0)
    run_jobs(bot.app)
    (message,) = sinks.robot_texts(KEY)
    assert "broken_sync" in message and str(own.id) in message
    assert len(bot.records()) == 1  # the STOP run never reached the pipeline
    assert [m for c, m in bot.sent if c == "cli:alice" and m.startswith("❌")]


def test_ds_errors_never_crash_the_job_and_unread_runs_are_retried(
    scan_bot: ScanBots, sinks: Sinks, clock: FakeClock, sqlite_url: str
) -> None:
    bot = scan_bot(sqlite_url, scan={**SCAN_ON, "projects": ["etl", "nosuch"]})
    cron = bot.sim.run_directly("order_sync")
    bot.sim.advance(300)
    bot.sim.fail("instances", status=500, times=1)
    down = bot.scan()
    assert down.reported == [] and len(down.errors) == 2  # the list answered 500; project nosuch is unknown
    assert any("HTTP 500" in e for e in down.errors) and any("nosuch" in e for e in down.errors)
    bot.sim.fail("/tasks", status=500, times=1)
    unread = bot.scan()
    assert unread.reported == [] and any("could not be read" in e for e in unread.errors)
    assert bot.records() == []  # nothing half-read was reported
    clock.advance(60)
    assert bot.scan().reported == [cron.id]  # released, so the next scan retried it
    assert bot.metric("xihe_ds_scan_instances_total", {"outcome": "error"}) == 5  # nosuch on every scan
    assert bot.metric("xihe_job_runs_total", {"job": "alerts_scan", "outcome": "error"}) == 0


def test_two_replicas_scanning_at_once_read_each_run_once(
    scan_bot: ScanBots, sinks: Sinks, clock: FakeClock, db_url: str
) -> None:
    bots = [
        scan_bot(db_url, holder="replica-a", scan=SCAN_ON),
        scan_bot(db_url, holder="replica-b", scan=SCAN_ON),
    ]
    runs = [bots[0].sim.run_directly("order_sync") for _ in range(3)]
    runs += [bots[0].sim.run_directly("broken_sync") for _ in range(3)]
    bots[0].sim.advance(300)
    results: list[ScanResult] = []
    barrier = threading.Barrier(2)

    def scan(bot: ScanBot) -> None:
        barrier.wait(timeout=30)
        results.append(bot.scan())

    threads = [threading.Thread(target=scan, args=(b,)) for b in bots]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    reported = sorted(i for r in results for i in r.reported)
    assert reported == sorted(r.id for r in runs)  # each run claimed by exactly one replica
    assert all(r.errors == [] for r in results)
    assert bots[0].requests("/tasks") == len(runs)  # no run's tasks (nor then its logs) were read twice
    for b in bots:
        assert b.scan().reported == []
    decided = bots[0].records()
    assert {r["instance_id"] for r in decided} == {r.id for r in runs}
    assert "duplicate_event" not in {r["reason"] for r in decided}  # no run was fed twice
    for _ in range(70):  # same error on one host: pushed, folded, a suspect-node alert; drain the windows
        clock.advance(10)
        for b in bots:
            run_jobs(b.app)
    assert delivered_exactly_once(bots[0].app, sinks)


def test_a_claim_left_by_a_dead_replica_lapses(
    scan_bot: ScanBots, sinks: Sinks, clock: FakeClock, sqlite_url: str
) -> None:
    bot = scan_bot(sqlite_url, scan={**SCAN_ON, "lease_seconds": 120})
    cron = bot.sim.run_directly("order_sync")
    bot.sim.advance(300)
    inst = bot.app.deps.dolphin.client.get_instance(ETL, cron.id)
    scanner = bot.app.get(SCANNER)
    assert scanner is not None
    dead = type(scanner.marks)(bot.app.deps.engine, "dead-replica")
    lease = timedelta(seconds=120)
    assert dead.claim(mark_key(inst), clock(), lease, clock() + timedelta(hours=1), None)
    assert bot.scan().skipped == {"claimed_elsewhere": 1}
    clock.advance(121)
    assert bot.scan().reported == [cron.id]


def test_the_scan_is_off_by_default_and_needs_project_names(scan_bot: ScanBots, sqlite_url: str) -> None:
    bot = scan_bot(sqlite_url)
    assert "alerts_scan" not in {j.id for j in all_jobs(bot.app)}
    assert bot.app.get(SCANNER) is None and scan_failed_runs(bot.app) is None
    with pytest.raises(ConfigError, match="scan"):
        scan_bot(sqlite_url, scan={"enabled": True})
