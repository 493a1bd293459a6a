"""The graph field: a unit's callee names and its callers' names, kept current by incremental updates."""

from __future__ import annotations

import numpy as np

from xihe.tools.codeindex.bm25 import Bm25Index
from xihe.tools.codeindex.index import CodeIndex
from xihe.tools.codeindex.service import index_repo, open_index

SCHEDULER = '''
def process_due_jobs():
    """Run what is due."""
    return wakeup_thread()


def wakeup_thread():
    return 1
'''


def field_score(idx: CodeIndex, qualname: str, word: str) -> float:
    """The graph field's BM25 score of the unit `qualname` for `word`."""
    scores = idx.neighbours.scores([word])
    slot = next(i for i, u in enumerate(idx.units) if u is not None and u.qualname == qualname)
    return float(scores[slot])


def test_callee_is_found_by_its_callers_name_and_caller_by_its_callees(make_repo, cfg, embedder) -> None:
    repo = make_repo({"app/sched.py": SCHEDULER})
    idx, _ = index_repo(repo, cfg, embedder=embedder)
    assert field_score(idx, "wakeup_thread", "process_due_jobs") > 0  # its caller's name
    assert field_score(idx, "process_due_jobs", "wakeup_thread") > 0  # the name it calls
    assert field_score(idx, "wakeup_thread", "wakeup_thread") == 0  # not its own name


def test_a_new_caller_in_another_file_reaches_the_callee_after_an_update(make_repo, cfg, embedder) -> None:
    repo = make_repo({"app/sched.py": SCHEDULER, "app/other.py": "def unrelated():\n    return 2\n"})
    index_repo(repo, cfg, embedder=embedder)
    (repo / "app/other.py").write_text("def drain_mailbox():\n    return wakeup_thread()\n", encoding="utf-8")
    idx, rep = index_repo(repo, cfg, embedder=embedder)
    assert rep.files_changed == ["app/other.py"]  # sched.py was not re-parsed ...
    assert field_score(idx, "wakeup_thread", "drain_mailbox") > 0  # ... yet its unit has the new caller
    loaded = open_index(repo, cfg, embedder)
    assert loaded is not None and field_score(loaded, "wakeup_thread", "drain_mailbox") > 0
    (repo / "app/other.py").unlink()
    idx, _ = index_repo(repo, cfg, embedder=embedder)
    assert field_score(idx, "wakeup_thread", "drain_mailbox") == 0  # the caller is gone
    assert field_score(idx, "wakeup_thread", "process_due_jobs") > 0


def test_set_rows_scores_as_if_built_with_those_rows() -> None:
    docs = [["a", "b"], ["b", "c", "c"], ["d"]]
    edited = Bm25Index()
    edited.add(docs)
    edited.set_rows([1], [["e", "a", "a", "a"]])
    fresh = Bm25Index()
    fresh.add([docs[0], ["e", "a", "a", "a"], docs[2]])
    for q in (["a"], ["c"], ["e"], ["b", "d"]):
        assert np.allclose(edited.scores(q), fresh.scores(q)), q
    assert edited.scores(["c"]).max() == 0  # the replaced row's old terms are gone
    edited.set_rows([2, 0], [["x", "x"], ["c"]])  # several rows, in any order
    fresh = Bm25Index()
    fresh.add([["c"], ["e", "a", "a", "a"], ["x", "x"]])
    for q in (["a"], ["c"], ["x"], ["d"]):
        assert np.allclose(edited.scores(q), fresh.scores(q)), q
