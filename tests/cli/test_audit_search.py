"""`xihe audit search` as people use it at 3 am: by the workflow name they know (any of its names),
while the config is broken, and piped into `head`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from tests.child_env import pythonpath
from tests.conftest import write_config
from xihe.agent.audit import AuditEvent, SqlAuditSink
from xihe.agent.cli.main import main
from xihe.agent.db import open_store_engine
from xihe.tools.dolphin.names import CatalogEntry, names_of
from xihe.tools.dolphin.store import SqlCatalogStore

T0 = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


def seed(url: str, named: list[str]) -> None:
    """One audited trigger call per name in `named`, as its user typed the workflow."""
    engine = open_store_engine(url)
    sink = SqlAuditSink(engine)
    for i, name in enumerate(named):
        sink.record(
            AuditEvent(
                at=T0 + timedelta(seconds=i),
                kind="tool_call",
                actor="bob",
                outcome="done",
                tool="trigger_dolphinscheduler",
                args_redacted={"workflow": name, "dates": "2026-12-01", "n": i},
            )
        )
    SqlCatalogStore(engine).replace(
        [
            CatalogEntry("etl", "order_sync", 1001, "ONLINE", 7),
            CatalogEntry("etl", "ds_only", 3003, "ONLINE", 7),
        ],
        T0,
    )
    engine.dispose()


@pytest.fixture
def config(tmp_path: Path, sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    cfg = write_config(tmp_path / "config", files=("xihe.yaml", "access.yaml", "workflows.yaml"))
    monkeypatch.setenv("XIHE_DATABASE_URL", sqlite_url)
    seed(sqlite_url, ["订单同步", "order_sync", "daily_sales", "订单同步", "ds_only", "Order_Sync"])
    return cfg


def found(cfg: Path, capsys: pytest.CaptureFixture[str], *flags: str) -> list[int]:
    assert main(["--config", str(cfg), "audit", "search", "--json", *flags]) == 0
    return sorted(r["args_redacted"]["n"] for r in json.loads(capsys.readouterr().out))


@pytest.mark.parametrize("name", ["order_sync", "订单同步", "1001", "ORDER SYNC"])
def test_a_workflow_is_found_by_any_of_its_names(
    config: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    # calls recorded as 订单同步, order_sync and Order_Sync are all the one workflow (workflows.yaml:
    # name order_sync, alias 订单同步, code 1001); daily_sales and ds_only are others
    assert found(config, capsys, "--workflow", name) == [0, 1, 3, 5]


def test_a_name_only_dolphinscheduler_knows_and_a_substring(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert found(config, capsys, "--workflow", "3003") == [4]  # by its code, from the synced catalog
    assert found(config, capsys, "--workflow", "order") == []  # a workflow, not a substring of one


def test_names_of_is_the_query_itself_when_nothing_knows_it() -> None:
    assert names_of("nightly", None) == {"nightly"}


def test_search_runs_while_the_config_is_broken(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    access = config / "access.yaml"
    access.write_text(access.read_text() + "\nmax_turn: 3\n")  # a typo: the directory no longer validates
    assert main(["--config", str(config), "config", "check"]) == 1
    capsys.readouterr()
    assert main(["--config", str(config), "audit", "search", "--workflow", "订单同步", "--json"]) == 0
    out, err = capsys.readouterr()
    assert sorted(r["args_redacted"]["n"] for r in json.loads(out)) == [
        0,
        1,
        3,
        5,
    ]  # workflows.yaml still read
    assert "warning: the config does not validate: " in err and "access.yaml" in err and "max_turn" in err
    assert "Searching the store named by XIHE_DATABASE_URL anyway." in err


def test_broken_config_falls_back_to_the_store_url_in_xihe_yaml(
    config: Path, sqlite_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("XIHE_DATABASE_URL")
    core = config / "xihe.yaml"
    data = yaml.safe_load(core.read_text())
    core.write_text(yaml.safe_dump({**data, "store": {"url": sqlite_url}, "bogus": 1}))
    assert main(["--config", str(config), "audit", "search", "--limit", "2"]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 2 and "trigger_dolphinscheduler" in out
    assert f"store.url in {core}" in err and sqlite_url not in err  # where, never the URL itself


def test_piped_into_head_it_ends_quietly(config: Path, sqlite_url: str) -> None:
    seed(sqlite_url, ["order_sync"] * 3000)  # far more than a pipe buffer
    env = {**os.environ, "XIHE_DATABASE_URL": sqlite_url, "PYTHONPATH": pythonpath()}
    argv = [
        sys.executable,
        "-m",
        "xihe.agent.cli",
        "--config",
        str(config),
        "audit",
        "search",
        "--limit",
        "3000",
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()  # `| head -1`: read one line, then go away
    proc.stdout.close()
    err = proc.stderr.read().decode()
    code = proc.wait(timeout=120)
    assert b"trigger_dolphinscheduler" in first
    assert code == 141, err  # 128 + SIGPIPE, like cat or grep
    assert "Traceback" not in err and "BrokenPipeError" not in err and "Exception ignored" not in err
