"""Task totals come from the workflow definition's DAG, not from the tasks started so far."""

from __future__ import annotations

import json

from tests.dolphin.conftest import ETL, ORDER_SYNC, client_for
from xihe.integrations.dolphinscheduler.client import DolphinClient
from xihe.integrations.dolphinscheduler.dag import dag_of, output_readers
from xihe.integrations.dolphinscheduler.profiles import PROFILES
from xihe.integrations.dolphinscheduler.runs import start_workflow
from xihe.integrations.dolphinscheduler.sim import DolphinSimulator
from xihe.tools.dolphin.names import CatalogEntry

ORDER = CatalogEntry("etl", "order_sync", ORDER_SYNC, "ONLINE", ETL)


def gets(sim: DolphinSimulator, ending: str) -> int:
    return sum(n for key, n in sim.counts.items() if key.startswith("GET") and key.endswith(ending))


def test_total_counts_every_task_of_the_dag_while_only_two_have_started(
    sim: DolphinSimulator, client: DolphinClient
) -> None:
    start_workflow(client, ORDER, "t1:s1", sim.clock())
    sim.advance(70)  # extract done, transform running, load not started
    (run,) = sim.instances_of("order_sync")
    inst = client.get_instance(ETL, run.id)
    _, tasks = client.current_tasks(ETL, run.id)
    assert [t.name for t in tasks] == ["transform", "extract"]
    sim.reset_counts()
    assert client.task_total(ETL, inst) == 3
    assert client.task_total(ETL, inst) == 3
    assert gets(sim, "definition/{n}") == 1  # read once per definition code and version


def test_a_run_of_an_older_version_counts_the_tasks_of_its_own_version(
    sim: DolphinSimulator, client: DolphinClient
) -> None:
    start_workflow(client, ORDER, "t1:s1", sim.clock())
    sim.advance(600)
    (old,) = sim.instances_of("order_sync")
    d = sim.definition("order_sync")
    d.version, d.tasks = 2, ("extract", "load")  # someone edits the workflow in DolphinScheduler
    start_workflow(client, ORDER, "t2:s1", sim.clock())
    sim.advance(600)
    new = next(i for i in sim.instances_of("order_sync") if i.id != old.id)
    fresh = client_for(sim, version=sim.version)
    sim.reset_counts()
    assert fresh.task_total(ETL, fresh.get_instance(ETL, new.id)) == 2
    assert fresh.task_total(ETL, fresh.get_instance(ETL, old.id)) == 3  # from the instance's dagData
    assert gets(sim, "definition/{n}") == 1


def test_dag_keys_follow_the_version() -> None:
    relations = [{"preTaskCode": 0, "postTaskCode": 1}, {"preTaskCode": 1, "postTaskCode": 2}]
    old = {"processDefinition": {"version": 4}, "processTaskRelationList": relations}
    new = {"workflowDefinition": {"version": 4}, "workflowTaskRelationList": relations}
    for version, data in (("3.1", old), ("3.2", old), ("3.3", new)):
        dag = dag_of(data, PROFILES[version].dag_keys)
        assert (dag.version, dag.task_codes) == (4, frozenset({1, 2}))
    assert dag_of(new, PROFILES["3.2"].dag_keys).task_codes == frozenset()  # 3.3 names are not read as 3.2's


def test_output_readers_are_the_tasks_using_an_out_parameter_of_the_task() -> None:
    """OUT localParams are what a task hands on (the varPool); `${prop}` is how a later task reads one."""
    out = {"prop": "row_count", "direct": "OUT", "type": "VARCHAR", "value": ""}
    given = {"prop": "day", "direct": "IN", "type": "VARCHAR", "value": "x"}
    data = {
        "taskDefinitionList": [
            {"code": 1, "name": "transform", "taskParams": {"localParams": [out, given], "rawScript": "t"}},
            {
                "code": 2,
                "name": "load",
                "taskParams": json.dumps({"rawScript": "load ${day}", "localParams": []}),
            },
            {"code": 3, "name": "report", "taskParams": json.dumps({"rawScript": "echo ${row_count}"})},
            {"code": 4, "name": "audit", "taskParams": "not json"},
        ]
    }
    assert output_readers(data, 1) == {"report": ("${row_count}",)}  # ${day} is an IN param: not output
    assert output_readers(data, 2) == {} and output_readers(data, 99) == {}
