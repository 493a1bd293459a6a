"""A storm in the documented event format through the real pipeline, deliverer and rate-limited robot.

The generator (tests/alerts/storm.py) knows which instances failed for good; the assertions check
the messages the simulated robot accepted against that truth.
"""

from __future__ import annotations

import re
from collections import defaultdict
from datetime import datetime, timedelta
from functools import cache

import pytest

from tests.alerts import storm as gen
from xihe.agent.alerts.event import parse_event
from xihe.agent.alerts.model import Reason
from xihe.agent.alerts.replay import ReplayResult, parse_lines, run_replay
from xihe.config.access import AccessConfig
from xihe.config.alerts import AlertsConfig
from xihe.config.workflows import WorkflowsConfig

SCENARIOS = {
    "steady": {"seed": 11, "instances": 400},
    # one run a second over 44 workers, half failing: windows and robots are busy at once
    "dense": {
        "seed": 5,
        "instances": 400,
        "spacing_seconds": 1,
        "p_fail": 0.5,
        "burst": (3, 6),
        "extra_hosts": 40,
    },
}


@cache
def replay(name: str = "steady") -> tuple[gen.Storm, ReplayResult]:
    s = gen.generate(**SCENARIOS[name])  # type: ignore[arg-type]
    loaded = parse_lines(s.jsonl().splitlines())
    assert loaded.bad == []
    cfg = AlertsConfig.model_validate(gen.alerts_config())
    wfs = WorkflowsConfig.model_validate({"workflows": gen.workflows()})
    return s, run_replay(loaded.events, cfg, wfs, AccessConfig().production_environments())


def sent_texts(res: ReplayResult) -> list[tuple[datetime, str, str, str]]:
    """(sent at, tier, key, text) of every message the robot accepted."""
    return [(datetime.fromisoformat(n["time"]), n["tier"], n["key"], n["text"]) for n in res.notifications]


def names(text: str, iid: int) -> bool:
    return re.search(rf"(?<!\d){iid}(?!\d)", text) is not None


def test_the_storm_has_every_ingredient() -> None:
    s, res = replay()
    cfg = gen.alerts_config()
    on_bad = [i for i, h in s.failed_host.items() if h == gen.BAD_HOST]
    assert len(on_bad) >= 10  # a node burst
    assert any(ln["state"] == "KILL" for ln in s.lines) and any(ln["state"] == "STOP" for ln in s.lines)
    recovered = {
        ln["instance_id"]
        for ln in s.lines
        if ln["task"] and ln["state"] == "FAILURE" and ln["retry_times"] < ln["max_retry_times"]
    } & s.not_failed
    assert len(recovered) >= 10  # intermediate failures that recovered
    hidden = [i for i in s.final_at if gen.in_maintenance(s, i, cfg)]
    assert any(s.workflow_of[i] == gen.P0_WORKFLOW for i in hidden) and len(hidden) >= 3
    reasons = {r.reason for r in res.records}
    assert {Reason.RETRY_PENDING, Reason.IN_PROGRESS, Reason.MAINTENANCE, Reason.NODE_STORM} <= reasons


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_no_instance_that_failed_for_good_goes_unnamed(scenario: str) -> None:
    s, res = replay(scenario)
    texts = [t for _at, _tier, _k, t in sent_texts(res)]
    unnamed = [i for i in s.final_at if not any(names(t, i) for t in texts)]
    assert unnamed == []


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_no_alert_names_an_instance_that_did_not_fail_for_good(scenario: str) -> None:
    s, res = replay(scenario)
    texts = [t for _at, _tier, _k, t in sent_texts(res)]
    wrongly = [i for i in s.not_failed if any(names(t, i) for t in texts)]
    assert wrongly == []


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_at_most_20_messages_per_robot_per_minute(scenario: str) -> None:
    _s, res = replay(scenario)
    assert res.rate_limit_violations == 0 and res.unsent == 0
    by_robot: dict[str, list[datetime]] = defaultdict(list)
    for at, key, _text in res.robot.sent:
        by_robot[key].append(at)
    assert set(by_robot) == {"sim-default", "sim-prod"}
    for times in by_robot.values():
        for i, t in enumerate(times):
            assert sum(1 for u in times[i:] if u < t + timedelta(minutes=1)) <= 20


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_first_p0_message_within_one_second_of_its_final_failure(scenario: str) -> None:
    s, res = replay(scenario)
    sent_at = {key: at for at, _tier, key, _t in sent_texts(res)}
    openers = [
        r
        for r in res.records
        if r.tier is not None
        and r.tier.value == "P0"
        and r.reason in (Reason.NEW_INSTANCE, Reason.NODE_STORM_OPENED)
    ]
    assert len(openers) >= 5
    for r in openers:
        assert sent_at[r.notification_key] - r.at <= timedelta(seconds=1), r
    cfg = gen.alerts_config()
    p0 = sorted(
        (at, i)
        for i, at in s.final_at.items()
        if s.workflow_of[i] == gen.P0_WORKFLOW or int(s.workflow_of[i][3:]) % 10 == 0
        if not gen.in_maintenance(s, i, cfg)
    )
    first_at, first_id = p0[0]
    first_msg = min(at for at, tier, _k, text in sent_texts(res) if tier == "P0" and names(text, first_id))
    assert first_msg - first_at <= timedelta(seconds=1)


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_messages_stay_within_twice_one_per_failed_instance_or_window(scenario: str) -> None:
    s, res = replay(scenario)
    cfg = gen.alerts_config()
    hidden = {i for i in s.final_at if gen.in_maintenance(s, i, cfg)}
    windows = len(cfg["maintenance"])
    bound = 2 * (len(set(s.final_at) - hidden) + windows)
    assert len(res.notifications) <= bound
    assert all(len(t.encode()) <= 4096 for _a, _t, _k, t in sent_texts(res))


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_audit_rows_point_at_messages_that_were_sent(scenario: str) -> None:
    _s, res = replay(scenario)
    sent = {n["key"] for n in res.notifications}
    # the latest record of each instance: one a node window absorbed has a later record naming it
    latest = {r.instance_id: r.notification_key for r in res.records if r.notification_key}
    pointed = set(latest.values())
    assert pointed and pointed <= sent


def test_maintenance_ends_with_the_list_of_what_it_suppressed() -> None:
    s, res = replay()
    cfg = gen.alerts_config()
    ended = [t for _a, _tier, k, t in sent_texts(res) if k.startswith("maint:core-maint")]
    assert ended and "其中 P0 工作流：wf_00" in ended[0]
    hidden = [i for i in s.final_at if gen.in_maintenance(s, i, cfg) and s.workflow_of[i] == gen.P0_WORKFLOW]
    assert all(any(names(t, i) for t in ended) for i in hidden)


def test_the_generator_writes_the_documented_format() -> None:
    s, _res = replay()
    keys = {"at", "project", "workflow", "workflow_code", "instance_id", "state", "task", "host", "error"}
    keys |= {"retry_times", "max_retry_times", "environment"}
    assert all(set(ln) == keys for ln in s.lines)
    start = next(ln for ln in s.lines if ln["task"] is None)
    assert start["state"] == "RUNNING_EXECUTION" and start["host"] is None
    assert parse_event(start).is_task is False


def test_record_of_makes_the_record_the_dataclass_makes() -> None:
    """record_of sets the record's fields directly (issue 30): every field, the same values, equal and
    hashing alike to AlertRecord(...), still frozen."""
    import dataclasses

    from xihe.agent.alerts.classify import idempotency_key
    from xihe.agent.alerts.folding import record_of
    from xihe.agent.alerts.model import AlertRecord, Reason, Tier

    e = parse_event(
        {
            "at": "2026-12-02T09:00:00+00:00",
            "workflow": "wf",
            "instance_id": 7,
            "state": "FAILURE",
            "task": "t",
        }
    )
    fast = record_of(e, e.at, Reason.NEW_INSTANCE, Tier.P1, "detail", "key-1")
    slow = AlertRecord(
        e.at, idempotency_key(e), 7, "wf", "t", Reason.NEW_INSTANCE, Tier.P1, "detail", "key-1"
    )
    assert vars(fast) == vars(slow) and fast == slow and hash(fast) == hash(slow)
    assert list(vars(fast)) == [f.name for f in dataclasses.fields(AlertRecord)]
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.detail = "changed"  # type: ignore[misc]
