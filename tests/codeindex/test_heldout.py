"""Held-out evaluation: the shipped sets, the dev/test split, docstring questions and per-group reports."""

from __future__ import annotations

import pytest

from xihe.tools.codeindex.heldout import (
    SETS,
    EvalSet,
    Question,
    docstring_questions,
    first_sentence,
    hand_written,
    load_set,
    report,
    split_of,
)
from xihe.tools.codeindex.service import index_repo

JOBS_JAVA = """package demo;

public class Jobs {
    /** Schedules the {@link Runnable} again after the configured backoff delay. @param r the job */
    public void requeueLater(Runnable r) {
        timer.schedule(r, delay);
    }

    /** {@inheritDoc} */
    public String toString() { return "jobs"; }
}
"""


def test_every_shipped_set_has_english_and_chinese_questions_with_targets() -> None:
    for name in SETS:
        es = load_set(name)
        assert es.source["version"] and es.source["registry"] in {"npm", "pypi"}
        assert all(q["targets"] for q in es.questions)
        zh = [q for q in es.questions if any("\u4e00" <= c <= "\u9fff" for c in q["text"])]
        assert len(zh) >= 10 and len(es.questions) - len(zh) >= 15
    with pytest.raises(ValueError, match="unknown evaluation set 'nope'"):
        load_set("nope")


def test_split_is_fixed_by_the_text_and_uses_both_halves() -> None:
    texts = [f"question {i}" for i in range(40)]
    splits = [split_of(t) for t in texts]
    assert splits == [split_of(t) for t in texts]
    assert {"dev", "test"} == set(splits)


def test_first_sentence_reduces_javadoc_tags_and_stops_at_block_tags() -> None:
    doc = "Returns the {@link ReactContext#getName() name} of the {@code Foo}. More text."
    assert first_sentence(doc) == "Returns the name of the Foo."
    assert first_sentence("Stops the timer @param t the timer") == "Stops the timer"


def test_docstring_questions_drop_the_units_own_name_and_inherited_docs(make_repo, cfg, embedder) -> None:
    repo = make_repo({"Jobs.java": JOBS_JAVA})
    idx, _ = index_repo(repo, cfg, embedder=embedder, full=True)
    qs = docstring_questions(idx, ["java"], 10, skip=())
    assert [(q.text, q.targets) for q in qs] == [
        (
            "Schedules the Runnable again after the configured backoff delay",
            (("Jobs.java", "Jobs.requeueLater"),),
        )
    ]
    assert qs[0].group == "docstring" and qs[0].split in {"dev", "test"}


def test_a_hand_written_target_missing_from_the_index_names_the_question(make_repo, cfg, embedder) -> None:
    repo = make_repo({"Jobs.java": JOBS_JAVA})
    idx, _ = index_repo(repo, cfg, embedder=embedder, full=True)
    es = EvalSet(
        "demo",
        {},
        [
            {"text": "put a job back later", "targets": [["Jobs.java", "Jobs.requeueLater"]]},
            {"text": "任务稍后重新排队", "targets": [["Jobs.java", "Jobs.requeueLater"]]},
        ],
        [],
        ("java",),
    )
    assert [q.group for q in hand_written(es, idx)] == ["manual", "manual-zh"]
    bad = EvalSet("demo", {}, [{"text": "where is retry", "targets": [["Jobs.java", "Jobs.retry"]]}], [], ())
    with pytest.raises(ValueError, match=r"'where is retry'.*Jobs\.retry"):
        hand_written(bad, idx)


def test_report_counts_each_group_and_split_separately() -> None:
    t = (("a", "b"),)
    ranked = [
        (Question("q1", t, "docstring", "dev"), 1),
        (Question("q2", t, "manual", "test"), 2),
        (Question("q3", t, "manual-zh", "test"), None),
        (Question("q4", t, "manual", "dev"), None),
    ]
    test = report(ranked, "test")
    assert test["manual"] == {"n": 1, "recall@1": 0.0, "recall@5": 1.0, "recall@10": 1.0, "mrr@10": 0.5}
    assert test["manual-zh"]["recall@10"] == 0.0 and test["docstring"]["n"] == 0
    assert test["all"]["n"] == 2 and test["all"]["mrr@10"] == 0.25
    assert report(ranked, "all")["all"]["n"] == 4 and report(ranked, "dev")["all"]["mrr@10"] == 0.5
