"""Doc-sentence vectors: split, max-pooled into the unit's vector score, kept right by updates and saves."""

from __future__ import annotations

import numpy as np

from xihe.config.code import CodeConfig, EmbeddingConfig
from xihe.tools.codeindex.fields import doc_sentences
from xihe.tools.codeindex.index import CodeIndex
from xihe.tools.codeindex.service import index_dir, index_repo, open_index

SECOND = "Stale entries are evicted by a background sweeper thread."
CACHE_PY = f'''
def warm_cache(keys):
    """Load the given keys into the in-memory store. {SECOND} Nothing else happens here."""
    return keys


def unrelated(x):
    """Compute a checksum of a byte buffer."""
    return x
'''


def _slot(idx: CodeIndex, qualname: str) -> int:
    return next(i for i, u in enumerate(idx.units) if u is not None and u.qualname == qualname)


def test_doc_sentences_split_limit_and_skip_fragments() -> None:
    doc = "Open the file.  It is read\n  lazily! Why? Because files can be large and slow."
    assert doc_sentences(doc, 4) == [
        "Open the file.",
        "It is read lazily!",
        "Because files can be large and slow.",
    ]
    assert doc_sentences(doc, 1) == ["Open the file."]
    assert doc_sentences(doc, 0) == [] and doc_sentences("", 3) == []


def test_a_later_doc_sentence_scores_its_unit_like_an_exact_match(make_repo, cfg, embedder) -> None:
    repo = make_repo({"cache.py": CACHE_PY})
    idx, _ = index_repo(repo, cfg, embedder=embedder)
    slot = _slot(idx, "warm_cache")
    assert len(idx.sent_owner) == 4 and set(idx.sent_owner.tolist()) == {slot, _slot(idx, "unrelated")}
    with_sentences = idx.vector_scores(SECOND)
    assert with_sentences is not None and with_sentences[slot] > 0.999
    assert idx.search(SECOND, 1, mode="vector").hits[0].unit.qualname == "warm_cache"

    off = CodeConfig(index_dir=cfg.index_dir + "-off", embedding=EmbeddingConfig(doc_sentences=0))
    plain, _ = index_repo(repo, off, embedder=embedder)
    assert len(plain.sent_owner) == 0
    without = plain.vector_scores(SECOND)
    assert without is not None and without[_slot(plain, "warm_cache")] < 0.99


def test_updates_compaction_and_reload_keep_sentences_with_their_units(make_repo, cfg, embedder) -> None:
    repo = make_repo({"cache.py": CACHE_PY, "other.py": 'def other():\n    """Say hello to the user."""\n'})
    idx, _ = index_repo(repo, cfg, embedder=embedder)
    (repo / "cache.py").write_text(CACHE_PY.replace(SECOND, "Entries never expire on their own."), "utf-8")
    idx.update_files(["cache.py"])
    old = idx.vector_scores(SECOND)
    assert old is not None and not np.isfinite(old[[i for i, u in enumerate(idx.units) if u is None]]).any()
    hit = idx.search("Entries never expire on their own.", 1, mode="vector").hits[0]
    assert hit.unit.qualname == "warm_cache" and hit.score > 0.999

    idx.compact()
    assert all(idx.units[int(o)] is not None for o in idx.sent_owner)
    assert np.all(np.diff(idx.sent_owner) >= 0)
    fresh = CodeIndex(repo, cfg.index_dir + "-fresh", cfg, embedder)
    fresh.build()
    query = "Entries never expire on their own."
    got, want = idx.vector_scores(query), fresh.vector_scores(query)
    assert got is not None and want is not None
    by_name = {u.qualname: float(got[i]) for i, u in enumerate(idx.units) if u is not None}
    expected = {u.qualname: float(want[i]) for i, u in enumerate(fresh.units) if u is not None}
    assert by_name.keys() == expected.keys()
    assert all(abs(by_name[k] - expected[k]) < 1e-5 for k in expected)  # batch sizes differ: float noise

    idx.save()
    loaded = open_index(repo, cfg, embedder)
    assert loaded is not None
    again = loaded.vector_scores(query)
    assert again is not None and np.array_equal(again, got)
    # an index built with another doc_sentences setting is rebuilt, not mixed
    other = cfg.model_copy(update={"embedding": EmbeddingConfig(doc_sentences=2)})
    assert open_index(repo, other, embedder) is None
    assert (index_dir(repo, cfg) / "sent_vectors.npy").exists()


def test_eval_control_set_asks_with_second_sentences(make_repo, cfg, embedder) -> None:
    from xihe.tools.codeindex.stdlibqueries import later_sentence_queries

    repo = make_repo({"json/cache.py": CACHE_PY})
    idx, _ = index_repo(repo, cfg, embedder=embedder)
    qs = later_sentence_queries(idx, ["json"], 10)
    assert [(q.text, q.targets, q.source) for q in qs] == [
        (SECOND.rstrip("."), (("json/cache.py", "warm_cache"),), "docstring-later")
    ]
