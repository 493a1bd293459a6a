"""One event the pipeline breaks on is recorded as such, and the events after it are decided as usual.

The stores below are the in-memory ones with one operation failing for one instance, as a database
that loses a write would: `feed` (one event) and `feed_batch` (a webhook post) behave the same."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import pytest

from tests.alerts.conftest import T0, event
from xihe.agent.alerts.lifecycle import Alert
from xihe.agent.alerts.lifestore import InMemoryLifeStore
from xihe.agent.alerts.model import Reason
from xihe.agent.alerts.pipeline import FeedResult, Pipeline
from xihe.agent.alerts.state import NS_SEEN, InMemoryAlertStateStore, Value

BROKEN = 13  # the instance whose writes fail


class LosingState(InMemoryAlertStateStore):
    def put(self, ns: str, key: str, value: Value, due_at: datetime | None) -> None:
        if ns == NS_SEEN and key.startswith(f"{BROKEN}:"):
            raise RuntimeError("disk I/O error")
        super().put(ns, key, value, due_at)


class LosingLife(InMemoryLifeStore):
    def save(self, alert: Alert) -> Alert:
        if alert.instance_id == BROKEN:
            raise RuntimeError("lost the alert row")
        return super().save(alert)


def _one_by_one(p: Pipeline, events: list) -> list[FeedResult]:
    return [p.feed(e, T0) for e in events]


def _together(p: Pipeline, events: list) -> list[FeedResult]:
    return [p.feed_batch(events, T0)]


@pytest.mark.parametrize("feed", [_one_by_one, _together], ids=["feed", "feed_batch"])
def test_an_event_the_state_store_fails_on_is_a_bad_event_and_the_next_is_decided(
    make_pipeline: Callable[..., Pipeline], feed: Callable[[Pipeline, list], list[FeedResult]]
) -> None:
    p = make_pipeline(state=LosingState())
    results = feed(p, [event(instance_id=BROKEN), event(instance_id=14)])
    recs = [r for res in results for r in res.records]
    assert [(r.instance_id, r.reason) for r in recs] == [
        (BROKEN, Reason.BAD_EVENT),
        (14, Reason.NEW_INSTANCE),
    ]
    assert recs[0].detail == "internal error: RuntimeError: disk I/O error"
    assert recs[0].event_key == f"{BROKEN}:t1:FAILURE:0"
    notes = [n for res in results for n in res.notifications]
    assert [n.tier.value for n in notes] == ["P1"]  # instance 14's message, nothing for 13


@pytest.mark.parametrize("feed", [_one_by_one, _together], ids=["feed", "feed_batch"])
def test_a_lifecycle_failure_keeps_the_decision_already_made_and_says_what_broke(
    make_pipeline: Callable[..., Pipeline], feed: Callable[[Pipeline, list], list[FeedResult]]
) -> None:
    p = make_pipeline(life=LosingLife())
    results = feed(p, [event(instance_id=BROKEN), event(instance_id=14, error="No space left on device")])
    recs = [r for res in results for r in res.records]
    assert [(r.instance_id, r.reason) for r in recs] == [
        (BROKEN, Reason.NEW_INSTANCE),
        (BROKEN, Reason.BAD_EVENT),
        (14, Reason.NEW_INSTANCE),
    ]
    assert recs[1].detail == "internal error: RuntimeError: lost the alert row"
    moves = [m for res in results for m in res.transitions]
    assert [m.alert.instance_id for m in moves] == [14]  # 14's alert fired; 13's was not stored
