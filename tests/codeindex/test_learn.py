"""Learned fusion weights: chosen on the dev split, hand-written questions up, docstring queries not down."""

from __future__ import annotations

import numpy as np

from xihe.config.code import RetrievalConfig
from xihe.tools.codeindex.heldout import Question
from xihe.tools.codeindex.learn import (
    DOCSTRING_SLACK,
    GRID,
    KeywordScores,
    keeps_docstrings,
    learn,
    objective,
)
from xihe.tools.codeindex.service import index_repo

TIMERS_PY = '''
class ClipboardService:
    def put_text(self, text):
        """Store a value for later reads."""
        return text


def write_history(entries):
    """Append clipboard text and copy buffers of the text editor to the history file."""
    return entries


def expire_entries(cache):
    """Drop cached values older than their time to live."""
    return cache
'''


def test_objective_averages_groups_not_questions() -> None:
    ranks = {
        "a": [("docstring", 1), ("docstring", 1), ("docstring", 1), ("manual", None)],
        "b": [("manual", 2)],
    }
    # a: docstring 1.0, manual 0.0; b: manual 0.5 -> mean of the three groups present
    assert objective(ranks) == (1.0 + 0.0 + 0.5) / 3
    assert objective(ranks, ("manual",)) == 0.25


def test_a_docstring_gain_in_one_set_does_not_pay_for_a_loss_in_another() -> None:
    before = (0.95, 0.95)
    assert not keeps_docstrings((1.0, 0.90), before)  # the mean rose, one set lost 0.05
    assert keeps_docstrings((0.95 - DOCSTRING_SLACK, 0.99), before)
    assert GRID["test_penalty"][0] == 0.0  # the test-code prior is learned too, "off" among the choices


def test_learn_picks_a_grid_point_on_dev_without_losing_docstring_queries(make_repo, cfg, embedder) -> None:
    repo = make_repo({"clip.py": TIMERS_PY})
    idx, _ = index_repo(repo, cfg, embedder=embedder, full=True)
    t = "dev"
    qs = [
        Question("copy text to the clipboard", (("clip.py", "ClipboardService.put_text"),), "manual", t),
        Question(
            "Drop cached values older than their time to live",
            (("clip.py", "expire_entries"),),
            "docstring",
            t,
        ),
        # a test-split question must not influence the choice
        Question("history file", (("clip.py", "write_history"),), "manual", "test"),
    ]
    before = idx.cfg
    out = learn([("clip", idx, qs)], RetrievalConfig(name_weight=0.0, vector_weight=1.0))
    assert idx.cfg == before  # the indexes are left as they were
    assert all(out["weights"][k] in GRID[k] for k in GRID)
    assert out["docstring_mrr"] >= out["docstring_mrr_with_defaults"] - DOCSTRING_SLACK
    assert out["hand_written_mrr"] > out["hand_written_mrr_with_defaults"]
    assert out["weights"]["name_weight"] > 0  # only the name field can lift put_text here


def test_keyword_scores_are_computed_once_per_distinct_plan(make_repo, cfg, embedder) -> None:
    repo = make_repo({"clip.py": TIMERS_PY})
    idx, _ = index_repo(repo, cfg, embedder=embedder, full=True)
    real = idx.bm25.scores
    calls: list[dict[str, float]] = []

    def counted(terms):
        calls.append(dict(terms))
        return real(terms)

    idx.bm25.scores = counted  # type: ignore[method-assign]
    cache = KeywordScores()
    plain = Question(
        "copy text to the clipboard", (("clip.py", "ClipboardService.put_text"),), "manual", "dev"
    )
    for weight in GRID["identifier_weight"]:  # no identifier in the question: the same terms each time
        r = idx.cfg.retrieval.model_copy(update={"identifier_weight": weight})
        idx.cfg = idx.cfg.model_copy(update={"retrieval": r})
        plan, bm, _, _ = cache.get("clip", idx, plain, r)
    assert len(calls) == 1
    np.testing.assert_array_equal(bm, real(plan.terms))
    named = Question("where is put_text", (("clip.py", "ClipboardService.put_text"),), "manual", "dev")
    for weight in (1.0, 2.0):  # an identifier's weight changes the terms: scored again
        r = idx.cfg.retrieval.model_copy(update={"identifier_weight": weight})
        idx.cfg = idx.cfg.model_copy(update={"retrieval": r})
        plan, bm, _, _ = cache.get("clip", idx, named, r)
    assert len(calls) == 3
    assert plan.terms["put_text"] == 2.0
    np.testing.assert_array_equal(bm, real(plan.terms))
