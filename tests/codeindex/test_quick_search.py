"""`xihe search` on a built index: the model's query vector from the saved word table, the config from
its validated snapshot, and neither pydantic nor the embedding model imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.codeindex.conftest import MAILER_JAVA, ORDERS_PY
from xihe.agent.cli.main import main
from xihe.config.code import load as load_code
from xihe.tools.codeindex import settings
from xihe.tools.codeindex.qvec import (
    FILE,
    Bpe,
    QueryVectors,
    model_files,
    table_words,
    vocabulary_words,
    weights_matrix,
)
from xihe.tools.codeindex.service import index_repo

TEXTS = [
    "resume the first unfinished step",
    "Where do we retry a failed task?",
    "HTTPServer get_due_jobs retryTask",
    "copy text to the clipboard, then (maybe) notify_owner",
    "café naïve 补数 backfill",
    "x",
]


def test_weights_are_read_in_place_as_the_model_loads_them(embedder) -> None:
    files = model_files(embedder.dim)
    assert files is not None
    mapped = weights_matrix(files[1])
    model = embedder._load().embedding
    assert mapped.shape == model.shape
    assert np.array_equal(np.asarray(mapped[[0, 5, 31999]], np.float32), model[[0, 5, 31999]])


def test_table_vectors_equal_the_models(embedder, tmp_path: Path) -> None:
    table = QueryVectors(embedder.dim)
    table.add(table_words(TEXTS), embedder)
    table.save(tmp_path)
    loaded = QueryVectors.load(tmp_path, embedder.dim)
    assert loaded is not None
    for text in TEXTS:
        got = loaded.vector(text)
        assert got is not None, text
        assert np.allclose(got, embedder.embed([text])[0], atol=1e-6), text


def test_bpe_splits_words_as_the_models_tokenizer_does(embedder) -> None:
    files = model_files(embedder.dim)
    assert files is not None
    bpe = Bpe.from_tokenizer(files[0])
    assert bpe is not None
    words = set(vocabulary_words(files[0])[::10])
    for path in ("index.py", "bm25.py", "bridge.py"):  # code words: identifiers, punctuation
        text = Path(__file__).resolve().parents[2].joinpath("tools", "codeindex", path).read_text()
        words |= {w for w in table_words([text]) if len(w) <= 24}
    words |= {"unpaid", "Zyxwvut", "café", "naïve", "补数", "😀emoji", "ﬁx", "a.b(c)", "x"}
    ordered = sorted(words)
    assert len(ordered) > 2500
    assert [bpe.ids(w) for w in ordered] == embedder.token_ids(ordered)


def test_a_word_outside_the_table_takes_bpe_or_the_model(embedder, tmp_path: Path) -> None:
    table = QueryVectors(embedder.dim)
    table.add(["retry", "task"], embedder)
    assert table.vector("retry task") is not None
    assert table.vector("retry  task") is None  # two spaces tokenize as "▁▁": the model decides
    assert table.vector("<s> retry") is None  # special tokens are matched in the raw text
    assert table.vector("retry unpaid") is None  # no merges to split an unknown word
    files = model_files(embedder.dim)
    assert files is not None
    table.bpe = Bpe.from_tokenizer(files[0])
    got = table.vector("retry unpaid")
    assert got is not None and np.allclose(got, embedder.embed(["retry unpaid"])[0], atol=1e-6)
    table.save(tmp_path)
    loaded = QueryVectors.load(tmp_path, embedder.dim)
    assert loaded is not None and loaded.bpe is not None
    assert loaded.ids("unpaid") == embedder.token_ids(["unpaid"])[0]
    lines = (tmp_path / FILE).read_text(encoding="utf-8").split("\n", 1)
    (tmp_path / FILE).write_text("other-model-files\n" + lines[1], encoding="utf-8")
    assert QueryVectors.load(tmp_path, embedder.dim) is None  # made with other model files


def test_index_search_uses_the_table_and_falls_back_to_the_model(make_repo, cfg, embedder) -> None:
    repo = make_repo({"app/orders.py": ORDERS_PY, "src/Mailer.java": MAILER_JAVA})
    idx, _ = index_repo(repo, cfg, embedder=embedder)
    assert idx.query_vectors is not None
    assert idx.query_vectors.ids("paid") is not None  # a word the repository embedded
    assert idx.query_vectors.ids("weather") is not None  # a whole-word piece of the vocabulary
    texts = ("cancel the order in time", "Zyxwvut unpaid order", "order  twice")
    assert idx.query_vectors.vector(texts[0]) is not None  # from the table
    assert idx.query_vectors.vector(texts[1]) is not None  # two words split by the saved merges
    assert idx.query_vectors.vector(texts[2]) is None  # two spaces: the model embeds it
    got = [idx.vector_scores(t) for t in texts]
    idx.query_vectors = None  # every query vector from the model itself
    for text, scores in zip(texts, got, strict=True):
        expected = idx.vector_scores(text)
        assert scores is not None and expected is not None
        assert np.allclose(scores, expected, atol=1e-6), text


def test_an_index_dir_inside_the_repository_is_not_indexed(make_repo, embedder) -> None:
    repo = make_repo({"app/orders.py": ORDERS_PY}, use_git=False)
    inside = load_code(f"index_dir: {repo / 'var' / 'index'}\n")
    idx, _ = index_repo(repo, inside, embedder=embedder)
    assert list(idx.files) == ["app/orders.py"]
    _, report = index_repo(repo, inside, embedder=embedder)
    assert report.mode == "reconcile" and report.files_changed == []  # its own files are not changes


@pytest.fixture
def conf(tmp_path: Path) -> Path:
    d = tmp_path / "conf"
    d.mkdir()
    (d / "code.yaml").write_text(
        f"# code search\nindex_dir: {tmp_path / 'idx'}  # where\nretrieval:\n  vector_weight: 2.5\n",
        encoding="utf-8",
    )
    return d


def test_the_validated_config_is_reused_while_code_yaml_is_unchanged(make_repo, conf: Path, capsys) -> None:
    repo = make_repo({"app/orders.py": ORDERS_PY})
    assert settings.cached(conf, repo) is None
    assert main(["index", "--quiet", "--repo", str(repo), "--config", str(conf)]) == 0
    snap = settings.cached(conf, repo)
    assert snap is not None
    assert snap.retrieval.vector_weight == 2.5
    assert snap.walk.model_dump() == load_code((conf / "code.yaml").read_text()).walk.model_dump()
    (conf / "code.yaml").write_text((conf / "code.yaml").read_text() + "context_units: 3\n")
    assert settings.cached(conf, repo) is None  # another text: validated again
    (conf / "code.yaml").write_text((conf / "code.yaml").read_text().replace("2.5", "lots"))
    assert main(["search", "--repo", str(repo), "--config", str(conf), "cancel order"]) == 2
    assert "code.yaml:4: retrieval.vector_weight" in capsys.readouterr().err  # still reported, not skipped


def test_a_search_on_a_built_index_imports_neither_pydantic_nor_the_model(make_repo, conf: Path) -> None:
    repo = make_repo({"app/orders.py": ORDERS_PY, "src/Mailer.java": MAILER_JAVA})
    search = ["search", "--repo", str(repo), "--config", str(conf), "--json", "cancel the unpaid order"]
    assert main(["index", "--quiet", "--repo", str(repo), "--config", str(conf)]) == 0
    code = (
        "import json, sys\n"
        "from xihe.agent.cli.main import main\n"
        "rc = main(sys.argv[1:])\n"
        "heavy = {'pydantic', 'wordllama', 'tokenizers', 'safetensors', 'scipy', 'jieba', 'yaml'}\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & heavy)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, *search],
        capture_output=True,
        text=True,
        check=True,
        env=dict(os.environ),
    ).stdout.splitlines()
    hits, imported = json.loads(out[0]), json.loads(out[1])
    assert hits[0]["symbol"] == "OrderStateMachine.on_timeout"
    assert imported == []
