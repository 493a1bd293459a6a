"""`xihe index` / `xihe search --json` shapes, and config/code.yaml validation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.codeindex.conftest import ORDERS_PY
from xihe.agent.cli.main import main
from xihe.agent.errors import ConfigError
from xihe.config.code import load


@pytest.fixture
def conf_dir(tmp_path: Path) -> Path:
    d = tmp_path / "conf"
    d.mkdir()
    (d / "code.yaml").write_text(f"index_dir: {tmp_path / 'idx'}\n", encoding="utf-8")
    return d


def test_index_then_search_json(make_repo, conf_dir, capsys) -> None:
    repo = make_repo({"app/orders.py": ORDERS_PY})
    assert main(["index", str(repo), "--config", str(conf_dir), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["mode"] == "full" and report["units"] >= 3
    assert main(["index", "--repo", str(repo), "--config", str(conf_dir)]) == 0
    assert capsys.readouterr().out.startswith("unchanged:")
    assert (
        main(
            [
                "search",
                "--repo",
                str(repo),
                "--json",
                "-k",
                "2",
                "--config",
                str(conf_dir),
                "cancel",
                "unpaid",
                "order",
            ]
        )
        == 0
    )
    hits = json.loads(capsys.readouterr().out)
    assert len(hits) == 2
    assert set(hits[0]) == {"path", "start", "end", "symbol", "score"}
    assert hits[0] == {
        "path": "app/orders.py",
        "start": 10,
        "end": 13,
        "symbol": "OrderStateMachine.on_timeout",
        "score": hits[0]["score"],
    }
    assert hits[0]["score"] >= hits[1]["score"]


def test_search_json_prints_empty_list_when_nothing_matches(make_repo, conf_dir, capsys) -> None:
    repo = make_repo({"app/orders.py": ORDERS_PY})
    assert (
        main(["search", "--repo", str(repo), "--json", "--config", str(conf_dir), "KubernetesPodAutoscaler"])
        == 0
    )
    assert json.loads(capsys.readouterr().out) == []


def test_sample_yaml_is_valid_and_unknown_keys_name_file_and_line() -> None:
    cfg = load(Path("config/code.yaml").read_text(encoding="utf-8"), "config/code.yaml")
    assert cfg.embedding.kind == "wordllama" and cfg.retrieval.candidates == 50
    with pytest.raises(ConfigError) as exc:
        load("index_dir: var/index\nretrieval:\n  candidats: 5\n", "code.yaml")
    assert "code.yaml:3: retrieval.candidats" in str(exc.value)


@pytest.mark.slow
def test_eval_search_reports_metrics_for_each_mode(capsys) -> None:
    assert main(["eval", "search", "--sets", "stdlib", "--modules", "json,logging", "--limit", "20"]) == 0
    report = json.loads(capsys.readouterr().out)["stdlib"]
    for mode in ("bm25", "vector", "hybrid"):
        assert set(report[mode]["all"]) == {"n", "recall@1", "recall@5", "recall@10", "mrr@10"}
    assert report["query_ms"]["p50"] > 0 and report["incremental"]["units_reindexed"] > 0


def test_eval_search_names_an_unknown_set(capsys) -> None:
    assert main(["eval", "search", "--sets", "apscheduler-typo"]) == 2
    assert "unknown evaluation set 'apscheduler-typo'" in capsys.readouterr().err
