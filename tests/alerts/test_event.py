"""The event format: what parse_event accepts, what it rejects (naming the field), the mapping of a
DolphinScheduler report, and the stored form read back as written."""

from __future__ import annotations

import json
from dataclasses import fields
from datetime import UTC, datetime
from typing import Any

import pytest

from xihe.agent.alert_event import AlertEvent
from xihe.agent.alerts.event import EventError, from_report, parse_event, unknown_fields
from xihe.agent.alerts.replay import parse_lines

LINE: dict[str, Any] = {
    "at": "2026-12-02T17:00:05+08:00",
    "project": "etl",
    "workflow": "order_sync",
    "workflow_code": 1001,
    "instance_id": 101,
    "state": "FAILURE",
    "task": "load",
    "host": "10.0.0.11:1234",
    "error": "Connection refused",
    "retry_times": 3,
    "max_retry_times": 3,
    "environment": "prod",
}


def test_a_documented_line_parses_to_a_task_attempt_event() -> None:
    e = parse_event(LINE)
    assert (e.is_task, e.task, e.state, e.retry_times, e.max_retry_times, e.exhausted) == (
        True,
        "load",
        "FAILURE",
        3,
        3,
        True,
    )
    assert e.at == datetime(2026, 12, 2, 9, 0, 5, tzinfo=UTC) and e.at.utcoffset() is not None
    assert e.to_dict()["task"] == "load" and parse_event(e.to_dict()) == e


def test_every_optional_field_may_be_null_or_missing() -> None:
    required = {k: LINE[k] for k in ("at", "workflow", "instance_id", "state")}
    nulls = {**{k: None for k in LINE}, **required}
    for data in (required, nulls):
        e = parse_event(data)
        assert (e.task, e.host, e.error, e.retry_times, e.project, e.workflow_code) == ("", "", "", 0, "", 0)
        assert not e.is_task and e.to_dict()["task"] is None


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"at": None}, "missing required field(s) at"),
        ({"workflow": ""}, "missing required field(s) workflow"),
        ({"instance_id": None, "state": None}, "missing required field(s) instance_id, state"),
        ({"state": "EXPLODED"}, "state: unknown state 'EXPLODED'"),
        ({"at": "2026-12-02 17:00:05"}, "at: 2026-12-02 17:00:05 has no UTC offset"),
        ({"at": "yesterday"}, "at: not an ISO 8601 time"),
        ({"at": 1764666005}, "at: expected an ISO 8601 time, got int"),
        ({"instance_id": "abc"}, "instance_id: expected an integer"),
        ({"retry_times": True}, "retry_times: expected an integer, got a boolean"),
        ({"retry_times": -1}, "retry_times: must not be negative"),
        ({"task": {"name": "x"}}, "task: expected a string, got dict"),
    ],
)
def test_bad_events_say_which_field_is_wrong(change: dict[str, Any], problem: str) -> None:
    with pytest.raises(EventError) as err:
        parse_event({**LINE, **change})
    assert str(err.value).startswith(problem)


def test_tolerated_spellings() -> None:
    e = parse_event({**LINE, "state": "failure", "instance_id": "101", "at": "2026-12-02T09:00:05Z"})
    assert (e.state, e.instance_id) == ("FAILURE", 101)
    old = parse_event({**LINE, "task": None, "state": "WorkflowExecutionStatus{code=6, desc='failure'}"})
    assert old.state == "FAILURE" and not old.is_task  # the 3.1/3.2 toString form
    assert unknown_fields({**LINE, "colour": "red"}) == ["colour"]
    with pytest.raises(EventError, match="expected a JSON object"):
        parse_event([LINE])


def report(**kw: Any) -> AlertEvent:
    """The watcher's report of order_sync instance 101: the workflow's state, the task and its state."""
    base: dict[str, Any] = {
        "at": datetime(2026, 12, 2, 9, tzinfo=UTC),
        "project": "etl",
        "workflow": "order_sync",
        "workflow_code": 1001,
        "instance_id": 101,
        "state": "FAILURE",
        "task": "load",
        "task_state": "FAILURE",
        "retry_times": 1,
        "max_retry_times": 3,
        "source": "poller",
    }
    base.update(kw)
    return from_report(**base)


def test_a_report_of_the_workflow_and_its_task_maps_onto_the_one_event() -> None:
    ended = report()  # the workflow FAILURE: its event, naming the task
    assert (ended.task, ended.failed_task, ended.state, ended.source) == ("", "load", "FAILURE", "poller")
    running = report(state="RUNNING_EXECUTION")  # an attempt while the run goes on
    assert (running.task, running.state, running.exhausted) == ("load", "FAILURE", False)
    stopped = report(state="STOP", task_state="KILL")
    assert (stopped.task, stopped.state, stopped.failed_task_state) == ("", "STOP", "KILL")
    bare = report(task="", task_state="")
    assert (bare.task, bare.failed_task, bare.state) == ("", "", "FAILURE")
    with pytest.raises(EventError, match="task_state: unknown state"):
        report(state="RUNNING_EXECUTION", task_state="WEIRD")
    with pytest.raises(EventError, match="state: unknown state"):
        report(state="", task="", task_state="")


def test_the_stored_form_reads_back_as_written() -> None:
    e = report(
        state="STOP",
        task_state="KILL",
        log_tail="x\ny",
        start_time=datetime(2026, 12, 2, 8, tzinfo=UTC),
        parent_stopped=True,
    )
    assert AlertEvent.from_dict(e.to_dict()) == e
    attempt = parse_event(LINE)
    assert AlertEvent.from_dict(attempt.to_dict()) == attempt


def test_an_older_replay_line_with_task_state_still_reads() -> None:
    e = parse_event({**LINE, "state": "RUNNING_EXECUTION", "task_state": "FAILURE", "retry_times": 1})
    assert isinstance(e, AlertEvent) and (e.task, e.state, e.retry_times) == ("load", "FAILURE", 1)


PLAIN_EDGES: list[dict[str, Any]] = [
    {},
    {"instance_id": -3},
    {"workflow_code": -1},
    {"retry_times": -1},
    {"retry_times": True},
    {"at": "2026-12-02T09:00:05"},
    {"at": ""},
    {"at": "2026-12-02T01:00:05Z", "start_time": " 2026-12-02T09:00:05+08:00 ", "end_time": None},
    {"workflow": ""},
    {"state": "failure "},
    {"state": " SUCCESS\t"},
    {"state": "Kill"},
    {"state": "nope"},
    {"state": "WorkflowExecutionStatus{code=6, desc='failure'}"},
    {"parent_stopped": 1},
    {"host": 5},
    {"source": 3},
    {"x": 1},
    {"task": None, "error": None},
    {"instance_id": "7"},
    {"instance_id": 7.0},
    {"error": [1]},
    {"task_state": "FAILURE", "state": "RUNNING_EXECUTION"},
]


def _judged(parse: Any, data: dict[str, Any]) -> str:
    try:
        return repr(parse(data))  # repr: the offsets of the times too, not only the instants
    except EventError as exc:
        return f"EventError: {exc}"


@pytest.mark.parametrize("change", PLAIN_EDGES, ids=repr)
def test_the_plain_fast_path_makes_the_event_pydantic_makes_or_leaves_it_to_pydantic(
    change: dict[str, Any],
) -> None:
    from xihe.agent.alerts.event import _plain, _validated

    data = {**LINE, **change}
    fast = _plain(data)
    assert fast is None or repr(fast) == _judged(_validated, data)
    assert _judged(parse_event, data) == _judged(_validated, data)


def test_every_line_of_the_storm_streams_takes_the_fast_path_to_the_same_event() -> None:
    import json

    from tests.alerts import storm
    from xihe.agent.alerts.event import _plain, _validated

    for seed in (3, 7):
        for line in storm.generate(seed=seed, instances=200, p_duplicate=0.3).lines:
            data = json.loads(json.dumps(line))
            fast = _plain(data)
            slow = _validated(data)
            assert fast is not None and repr(fast) == repr(slow)
            assert fast == slow and hash(fast) == hash(slow) and vars(fast) == vars(slow)
            # filled in the fields' order, as AlertEvent(...) fills them (attribute reads stay fast)
            assert list(vars(fast)) == list(vars(slow)) == [f.name for f in fields(AlertEvent)]


def test_the_fast_path_keeps_one_object_per_distinct_text() -> None:
    first, again = (parse_event(json.loads(json.dumps(LINE))) for _ in range(2))
    assert first == again
    assert first.workflow is again.workflow and first.host is again.host and first.state is again.state


def test_the_fast_path_defaults_are_the_line_models_defaults() -> None:
    # event._DEFAULTS come from AlertEvent so that pydantic is not imported for a plain line; a default
    # changed in one of the two would make the fast path and the validator disagree
    from xihe.agent.alerts.event import _DEFAULTS
    from xihe.agent.alerts.eventline import EventLine

    model = {n: f.default for n, f in EventLine.model_fields.items() if not f.is_required()}
    del model["task_state"]  # an older line's field, mapped by from_report
    assert model == _DEFAULTS


def test_a_stream_skips_blank_and_comment_lines_and_reads_an_indented_object() -> None:
    text = json.dumps(LINE)
    loaded = parse_lines(["# a storm of 2026-12-02", "", "   ", "  # indented comment", f"  {text}", text])
    assert loaded.bad == []
    assert loaded.events == [parse_event(LINE), parse_event(LINE)]
