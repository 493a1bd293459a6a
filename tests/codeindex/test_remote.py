"""The OpenAI-compatible embeddings client and the rerank hook, against the loopback fake."""

from __future__ import annotations

import numpy as np
import pytest

from tests.codeindex.conftest import ORDERS_PY
from xihe.config.code import CodeConfig, EmbeddingConfig, RerankConfig
from xihe.tools.codeindex.embed import EmbeddingError, OpenAIEmbedder, Reranker
from xihe.tools.codeindex.fakes import FakeEmbeddings
from xihe.tools.codeindex.service import index_repo


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setenv("XIHE_TEST_EMBED_KEY", "sk-test")
    with FakeEmbeddings(dim=32, api_key="sk-test") as f:
        yield f


def emb_cfg(fake: FakeEmbeddings, **kw) -> EmbeddingConfig:
    return EmbeddingConfig(
        kind="openai",
        base_url=fake.url,
        model="fake-embed",
        api_key_env="XIHE_TEST_EMBED_KEY",
        batch_size=2,
        **kw,
    )


def test_embeds_in_batches_with_the_key_from_env(fake) -> None:
    vecs = OpenAIEmbedder(emb_cfg(fake)).embed(["order timeout", "send mail", "order timeout again"])
    assert vecs.shape == (3, 32)
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0)
    assert len(fake.server.requests) == 2  # batch_size=2
    assert fake.server.requests[0].headers["authorization"] == "Bearer sk-test"
    assert fake.server.requests[0].json() == {"model": "fake-embed", "input": ["order timeout", "send mail"]}


def test_errors_are_typed_retryable_and_keep_the_key_out(fake, monkeypatch) -> None:
    fake.fail_next = [503]
    with pytest.raises(EmbeddingError) as exc:
        OpenAIEmbedder(emb_cfg(fake)).embed(["x"])
    assert exc.value.retryable and exc.value.status == 503
    assert "sk-test" not in str(exc.value) and "injected failure" in str(exc.value)
    monkeypatch.setenv("XIHE_TEST_EMBED_KEY", "sk-wrong")
    with pytest.raises(EmbeddingError) as exc:
        OpenAIEmbedder(emb_cfg(fake)).embed(["x"])
    assert exc.value.status == 401 and not exc.value.retryable
    assert "sk-wrong" not in str(exc.value) and "Incorrect API key provided: ***" in str(exc.value)


def test_rerank_errors_keep_the_key_out(fake) -> None:
    fake.fail_next = [500]
    cfg = RerankConfig(
        enabled=True, base_url=fake.url, model="fake-rerank", api_key_env="XIHE_TEST_EMBED_KEY"
    )
    with pytest.raises(EmbeddingError) as exc:
        Reranker(cfg).rerank("q", ["a", "b"])
    assert exc.value.status == 500 and "sk-test" not in str(exc.value), str(exc.value)


def test_index_and_search_with_remote_embeddings(fake, make_repo, tmp_path) -> None:
    repo = make_repo({"app/orders.py": ORDERS_PY})
    cfg = CodeConfig(index_dir=str(tmp_path / "index"), embedding=emb_cfg(fake))
    idx, rep = index_repo(repo, cfg)
    assert rep.mode == "full" and idx.vectors.shape[1] == 32
    assert idx.search("notify owner order", 1).hits[0].unit.qualname == "notify_owner"
    # a restart with the same endpoint loads; a different embedder would force a rebuild
    _, again = index_repo(repo, cfg)
    assert again.mode == "unchanged"


def test_rerank_hook_reorders_candidates(fake, make_repo, tmp_path) -> None:
    repo = make_repo({"app/orders.py": ORDERS_PY})
    cfg = CodeConfig(
        index_dir=str(tmp_path / "index"),
        embedding=emb_cfg(fake),
        rerank=RerankConfig(
            enabled=True, base_url=fake.url, model="fake-rerank", api_key_env="XIHE_TEST_EMBED_KEY"
        ),
    )
    idx, _ = index_repo(repo, cfg)
    hits = idx.search("Send a message to the order's owner", 3).hits
    assert hits[0].unit.qualname == "notify_owner"
    assert any(r.path.endswith("/rerank") for r in fake.server.requests)
    assert Reranker(cfg.rerank).rerank("mail", ["send mail", "parse header"])[0][0] == 0
