"""Query understanding beyond single words: acronyms, 器 words split by the segmenter, the sense of a
Chinese word chosen by the rest of the question, and the test-code prior."""

from __future__ import annotations

import numpy as np

from xihe.config.code import CodeConfig, RetrievalConfig
from xihe.tools.codeindex.bm25 import Bm25Index
from xihe.tools.codeindex.bridge import CjkBridge
from xihe.tools.codeindex.fuse import fuse
from xihe.tools.codeindex.prior import is_test_path
from xihe.tools.codeindex.query import acronyms, plan
from xihe.tools.codeindex.service import index_repo
from xihe.tools.codeindex.tokens import Tokenizer

RTL_JAVA = """package demo;

public class I18nUtil {
    /** Lays every view out from the other side of the screen. */
    public void forceRTL(boolean value) { prefs.put(value); }

    public void allowRTL(boolean value) { prefs.put(value); }
}

public class Layout {
    /** Swaps the left and right margins of a node when laying out. */
    public void swapLeftRight(Node node) { node.swap(); }
}
"""

# where the repository itself says what rtl abbreviates: beside "left" and "right"
RTL_SWAP_JAVA = """package demo;

public class RtlSwap {
    /** In a RTL layout the left edge is the end and the right edge the start. */
    public int swapLeftAndRightInRTL(int edge) { return -edge; }
}
"""

JOBS_PY = '''
def run_job(job):
    """Run the job now and record that it ran."""
    job.run()


def implement_feature(spec):
    """Implement a feature from its specification."""
    return spec
'''


def test_acronyms_of_consecutive_words() -> None:
    assert "rtl" in acronyms("force right-to-left layout")
    assert "ttl" in acronyms("the time to live of a cache entry")
    assert acronyms("two words") == []  # fewer than three words make none


def test_a_question_reaches_the_identifier_its_words_abbreviate(make_repo, cfg, embedder) -> None:
    repo = make_repo({"src/I18nUtil.java": RTL_JAVA, "src/RtlSwap.java": RTL_SWAP_JAVA})
    idx, _ = index_repo(repo, cfg, embedder=embedder)
    terms = idx.query_plan("force right-to-left layout").terms
    assert terms["rtl"] == 2.0  # it stands for "right" and "left"
    with_it = idx.bm25.scores(terms)
    without = idx.bm25.scores({t: w for t, w in terms.items() if t != "rtl"})
    slot = {u.qualname: i for i, u in enumerate(idx.units) if u is not None}
    assert with_it[slot["I18nUtil.forceRTL"]] > without[slot["I18nUtil.forceRTL"]]  # the words alone miss it
    assert with_it[slot["Layout.swapLeftRight"]] == without[slot["Layout.swapLeftRight"]]
    assert "lwf" not in idx.query_plan("lets walk fast").terms  # only initials the repository has


def test_a_segmented_agent_word_is_bridged_whole() -> None:
    bridge = CjkBridge()
    known = {"close", "dispatcher", "scheduler", "dispatch", "schedule"}.__contains__
    whole = bridge.weighted(["关闭", "调度", "器"], known)
    assert whole["dispatcher"] == 1.0 and whole["scheduler"] == 0.5  # 调度器 -> the agent nouns
    assert bridge.weighted(["器"], {"device", "implement", "utensil"}.__contains__)  # alone: itself


def test_the_sense_the_rest_of_the_question_agrees_with_is_chosen(make_repo, cfg, embedder) -> None:
    repo = make_repo({"work.py": JOBS_PY})
    idx, _ = index_repo(repo, cfg, embedder=embedder)
    without = cfg.retrieval.model_copy(update={"sense_by_context": False})
    tokenizer, bridge = Tokenizer(), CjkBridge()
    known = idx.bm25.vocab.__contains__
    first = plan("执行任务", tokenizer, bridge, known, without, idx.bm25.postings)
    chosen = plan("执行任务", tokenizer, bridge, known, cfg.retrieval, idx.bm25.postings)
    # CC-CEDICT lists "implement" first for 执行; next to 任务 (job) the repository says "run"
    assert first.terms["implement"] > first.terms["run"]
    assert chosen.terms["run"] > chosen.terms["implement"]
    assert "run" in chosen.text.split() and "implement" not in chosen.text.split()


def test_postings_are_the_live_rows_of_a_term() -> None:
    bm = Bm25Index()
    bm.add([["run", "job"], ["implement"], ["run"]])
    assert sorted(bm.postings("run").tolist()) == [0, 2]
    bm.remove([2])
    assert bm.postings("run").tolist() == [0]
    assert bm.postings("absent").tolist() == []


def test_test_code_is_recognised_by_directory_or_file_name() -> None:
    for path in (
        "tests/test_jobs.py",
        "pkg/test_x.py",
        "x_test.go",
        "src/test/java/a/FooTest.java",
        "ui/Button.test.tsx",
        "lib/__tests__/a.js",
        "conftest.py",
    ):
        assert is_test_path(path), path
    for path in ("apscheduler/job.py", "src/main/java/Tester.java", "contest.py", "latest/x.py"):
        assert not is_test_path(path), path


def test_the_test_penalty_moves_test_code_below_implementation() -> None:
    bm = np.asarray([2.0, 1.9, 0.0], np.float32)  # slot 0 is a test, slot 1 the implementation
    vec = np.asarray([0.5, 0.5, 0.1], np.float32)
    r = RetrievalConfig(name_weight=0.0, test_penalty=0.0)
    assert [i for i, _ in fuse(bm, vec, None, r, "hybrid", lambda i: i == 0)][:2] == [0, 1]  # off
    on = r.model_copy(update={"test_penalty": 0.3})
    assert [i for i, _ in fuse(bm, vec, None, on, "hybrid", lambda i: i == 0)][:2] == [1, 0]
    assert CodeConfig().retrieval.test_penalty == 0.6  # learned on the dev split
