"""The events of one instant fed together with `feed_batch(events, now, each=True)` (issue 30: the
replay feeds each simulated instant's events so) are decided as if fed one by one at that instant."""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import groupby
from typing import Any

import pytest

from tests.alerts import storm as gen
from tests.alerts.test_storm import SCENARIOS
from xihe.agent.alert_event import AlertEvent
from xihe.agent.alerts.event import parse_event
from xihe.agent.alerts.lifestore import InMemoryLifeStore
from xihe.agent.alerts.outbox import InMemoryOutbox
from xihe.agent.alerts.pipeline import Pipeline
from xihe.agent.alerts.replay import parse_lines
from xihe.agent.alerts.state import InMemoryAlertStateStore
from xihe.config.access import AccessConfig
from xihe.config.alerts import AlertsConfig
from xihe.config.workflows import WorkflowsConfig

Fed = tuple[list[str], list[str], list[str], list[tuple[str, str]]]


def feed(events: list[AlertEvent], how: str) -> Fed:
    """Records, notifications, lifecycle changes and outbox rows of the storm's config fed `events`
    one by one, or each instant's events together (`each`: flushing between them; `batch`: not)."""
    raw = gen.alerts_config()
    raw["lifecycle"] = {"tiers": {"P0": {"escalate_after": 1, "max_escalations": 3}}}
    outbox = InMemoryOutbox()
    p = Pipeline(
        AlertsConfig.model_validate(raw),
        WorkflowsConfig.model_validate({"workflows": gen.workflows()}),
        InMemoryAlertStateStore(),
        outbox,
        production=AccessConfig().production_environments(),
        life=InMemoryLifeStore(),
    )
    fed = []
    for at, burst in groupby(events, key=lambda e: e.at):
        if how == "one by one":
            fed += [p.feed(e, at) for e in burst]
        else:
            fed.append(p.feed_batch(list(burst), at, each=how == "each"))
    return (
        [repr(r) for f in fed for r in f.records],
        [repr(n) for f in fed for n in f.notifications],
        [repr(m) for f in fed for m in f.transitions],
        [(r.key, r.text) for r in outbox.rows()],
    )


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_a_storm_fed_by_instant_decides_as_one_by_one(scenario: str) -> None:
    events = parse_lines(gen.generate(**SCENARIOS[scenario]).jsonl().splitlines()).events  # type: ignore[arg-type]
    assert sum(len(list(b)) > 1 for _at, b in groupby(events, key=lambda e: e.at)) > 50
    one_by_one = feed(events, "one by one")
    assert any("paged" in m for m in one_by_one[2])  # the lifecycle pages as it goes
    assert feed(events, "each") == one_by_one


def test_a_p0_sent_at_its_instant_is_sent_before_the_next_event_of_that_instant() -> None:
    """A P0's message is held for 0 s: fed one by one, it goes out before the next event of the same
    instant, so a second failed task of that run is a follow-up; `each` flushes between the events
    as that does, a plain batch (a webhook post) decides both before flushing and holds them as one."""
    at = datetime(2026, 12, 2, 1, 5, tzinfo=UTC)

    def line(task: str, **kw: Any) -> AlertEvent:
        base = {"at": at.isoformat(), "project": "etl", "workflow": gen.P0_WORKFLOW, "workflow_code": 5000}
        return parse_event({**base, "instance_id": 1, "state": "FAILURE", "task": task, **kw})

    events = [line("extract", host="10.0.0.11:1234"), line("load", error="exit code 3")]
    one_by_one = feed(events, "one by one")
    assert "follow-up" in one_by_one[0][-1]
    assert feed(events, "each") == one_by_one
    assert "follow-up" not in feed(events, "batch")[0][-1]
