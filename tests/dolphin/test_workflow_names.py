"""Workflow name resolution (exact, alias, fuzzy, ambiguous, unknown, offline) and the catalog sync."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from tests.dolphin.conftest import ETL, ORDER_SYNC, client_for
from xihe.agent.errors import DolphinError
from xihe.config.workflows import WorkflowsConfig
from xihe.config.yamlmodel import load_model
from xihe.integrations.dolphinscheduler.sim import DolphinSimulator
from xihe.tools.dolphin.names import (
    Alias,
    Ambiguous,
    CatalogEntry,
    InMemoryCatalogStore,
    Offline,
    Resolved,
    Unknown,
    aliases_from_config,
    resolve,
    sync_catalog,
)

CATALOG = [
    CatalogEntry("etl", "order_sync", 1, "ONLINE"),
    CatalogEntry("etl", "order_sync_hourly", 2, "ONLINE"),
    CatalogEntry("etl", "user_sync", 3, "ONLINE"),
    CatalogEntry("etl", "daily_sales", 4, "ONLINE"),
    CatalogEntry("dw", "daily_sales", 5, "ONLINE"),
    CatalogEntry("etl", "legacy_export", 6, "OFFLINE"),
    CatalogEntry("etl", "inventory_snapshot", 7, "ONLINE"),
]
WORKFLOWS_YAML = """
workflows:
  - name: order_sync
    project: etl
    aliases: [订单同步, 订单]
  - name: user_sync
    project: etl
    aliases: [用户同步]
  - name: inventory_snapshot
    project: etl
    aliases: [库存快照]
  - name: legacy_export
    project: etl
    aliases: [老导出]
"""
ALIASES = aliases_from_config(load_model(WORKFLOWS_YAML, "workflows.yaml", WorkflowsConfig))


@pytest.mark.parametrize(
    ("query", "code", "via"),
    [
        ("order_sync", 1, "exact"),
        ("Order Sync", 1, "exact"),
        ("order-sync workflow", 1, "exact"),
        ("订单同步", 1, "alias"),
        ("订单同步任务", 1, "alias"),
        ("订单同步的任务", 1, "alias"),
        ("订单", 1, "alias"),  # alias beats the fuzzy tie with order_sync_hourly
        ("用户同步", 3, "alias"),
        ("ordr_sync", 1, "fuzzy"),
        ("inventroy snapshot", 7, "fuzzy"),
        ("库存", 7, "fuzzy"),
    ],
)
def test_resolved(query: str, code: int, via: str) -> None:
    result = resolve(query, CATALOG, ALIASES)
    assert isinstance(result, Resolved), result
    assert (result.entry.code, result.via) == (code, via)


def test_same_name_in_two_projects_is_ambiguous_until_the_project_is_given() -> None:
    result = resolve("daily_sales", CATALOG, ALIASES)
    assert isinstance(result, Ambiguous)
    assert {(e.project, e.code) for e in result.candidates} == {("etl", 4), ("dw", 5)}
    narrowed = resolve("daily_sales", CATALOG, ALIASES, project="dw")
    assert isinstance(narrowed, Resolved) and narrowed.entry.code == 5


def test_close_fuzzy_candidates_are_ambiguous() -> None:
    result = resolve("order", CATALOG, [])
    assert isinstance(result, Ambiguous)
    assert {e.name for e in result.candidates} == {"order_sync", "order_sync_hourly"}


@pytest.mark.parametrize("query", ["legacy_export", "老导出"])
def test_offline_is_refused_with_a_reason(query: str) -> None:
    result = resolve(query, CATALOG, ALIASES)
    assert isinstance(result, Offline) and result.entry.code == 6
    assert result.entry.name == "legacy_export" and result.entry.release_state == "OFFLINE"
    assert isinstance(resolve(query, CATALOG, ALIASES, require_online=False), Resolved)


def test_unknown_gets_the_closest_names() -> None:
    result = resolve("user_snapshot_daily", CATALOG, ALIASES)
    assert isinstance(result, Unknown)
    assert result.closest and len(result.closest) <= 3
    assert isinstance(resolve("zzz", CATALOG, ALIASES), Unknown)
    assert resolve("   ", CATALOG, ALIASES) == Unknown("   ", ())


def test_alias_scoped_to_its_project() -> None:
    result = resolve("销售", CATALOG, [Alias("销售", "daily_sales", "dw")])
    assert isinstance(result, Resolved) and result.entry.project == "dw"


def test_sync_catalog_reads_codes_and_release_state(make_sim: Callable[..., DolphinSimulator]) -> None:
    sim = make_sim("3.2")
    entries = sync_catalog(client_for(sim), ["etl"])
    by_name = {e.name: e for e in entries}
    assert by_name["order_sync"].code == ORDER_SYNC and by_name["order_sync"].project_code == ETL
    assert by_name["legacy_export"].release_state == "OFFLINE"
    assert {e.project for e in entries} == {"etl"}
    store = InMemoryCatalogStore()
    now = datetime(2026, 12, 2, tzinfo=UTC)
    store.replace(entries, now)
    sim.set_online("legacy_export", True)  # released in DS; the next sync sees it
    store.replace(sync_catalog(client_for(sim)), now)
    assert {e.project for e in store.entries()} == {"etl", "dw"}
    synced = resolve("legacy_export", store.entries(), ALIASES)
    assert isinstance(synced, Resolved) and store.synced_at() == now
    with pytest.raises(DolphinError):
        sync_catalog(client_for(sim), ["missing_project"])
