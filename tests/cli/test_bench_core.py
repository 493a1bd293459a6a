"""`xihe bench core` runs its anchors in the same loop: the sqlite3 floor always, LangGraph's durable
step when the `bench` extra is installed, and otherwise says why it was skipped (no timings asserted)."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pytest

from xihe.agent.cli.bench import bench_core
from xihe.agent.cli.bench_anchors import langgraph_step, sqlite_floor


def test_the_floor_commits_two_rows_per_step_in_wal_with_synchronous_normal(tmp_path: Path) -> None:
    step = sqlite_floor(tmp_path / "floor.db")
    for i in range(3):
        step(i)
    conn = sqlite3.connect(tmp_path / "floor.db")  # another connection sees only committed rows
    assert conn.execute("SELECT count(*) FROM step").fetchone()[0] == 3
    assert conn.execute("SELECT count(*) FROM audit").fetchone()[0] == 3
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_without_the_bench_extra_the_langgraph_anchor_is_skipped_with_the_install_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "langgraph.checkpoint.sqlite", None)  # import fails as if absent
    step, note = langgraph_step(tmp_path / "lg.db")
    assert step is None
    assert note == "skipped: langgraph.checkpoint.sqlite is not installed (pip install -e '.[bench]')"


def test_the_report_names_each_anchor_and_xihes_ratio_to_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("XIHE_TEST_PG_URL", raising=False)
    report = bench_core(n=20)
    (sqlite,) = report["results"]
    assert sqlite["backend"] == "sqlite" and sqlite["calls"] == 20
    assert sqlite["sqlite3_floor"]["xihe_ratio_median"] > 0
    assert len(report["load_average"]) == 3
    try:
        import langgraph.checkpoint.sqlite  # noqa: F401
    except ImportError:
        assert sqlite["langgraph_anchor"].startswith("skipped: ")
        assert "langgraph" not in sqlite
    else:
        assert sqlite["langgraph_anchor"].startswith("langgraph 1.")
        assert sqlite["langgraph"]["median_ms"] > 0 and sqlite["langgraph"]["xihe_ratio_median"] > 0
