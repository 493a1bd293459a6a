"""Query understanding for hand-written English questions: question words dropped, the test-code prior
and when a question lifts it, acronyms the repository backs (and chance initials it does not)."""

from __future__ import annotations

from xihe.config.code import CodeConfig, RetrievalConfig
from xihe.tools.codeindex.bridge import CjkBridge
from xihe.tools.codeindex.query import abbreviation_weight, acronym_sources, asks_for_tests, plan
from xihe.tools.codeindex.service import index_repo
from xihe.tools.codeindex.tokens import Tokenizer

RETRY_PY = '''
def retry_task(task, policy):
    """Run a task again after it failed, while the policy allows another attempt."""
    if policy.allows(task.attempts):
        task.attempts += 1
        return task.run()
    return None


def render_page(html):
    """Turn a template into a page."""
    return html
'''

TEST_RETRY_PY = """
from jobs.retry import retry_task


def test_retry_failed_task():
    task = FailedTask()
    failed = retry_task(task, AlwaysRetry())
    assert failed.retried and task.failed_once and retry_task(task, NeverRetry()) is None
"""

RTL_JAVA = """package demo;

public class I18nUtil {
    /** Lays every view out from the other side of the screen. */
    public void forceRTL(boolean value) { prefs.put(value); }

    public boolean isRTL() { return prefs.rtl(); }
}

public class Layout {
    /** Swaps the left and right margins of a node when the layout is RTL. */
    public void swapLeftAndRightInRTL(Node node) { node.swap(); }
}
"""

COOKIES_JAVA = """package demo;

public class Cookies {
    /** Removes every cookie the store holds. */
    public void clearCookies() { store.clear(); }
}
"""

OPCODES_JAVA = """package demo;

public class Opcodes {
    public int cac() { return 7; }
}
"""


def test_question_words_go_and_what_is_asked_about_stays() -> None:
    known = {"retry", "failed", "task", "raft"}.__contains__  # raft: the initials of "retry a failed task"
    q = plan("where do we retry a failed task", Tokenizer(), CjkBridge(), known, RetrievalConfig())
    assert {t: w for t, w in q.terms.items() if t != "raft"} == {"retry": 1.0, "failed": 1.0, "task": 1.0}
    assert q.text == "do retry a failed task"  # the embedder keeps the sentence, without question words
    assert not q.tests


def test_a_language_the_question_names_is_not_searched_for() -> None:
    known = {"send", "headers", "java", "javascript", "js"}.__contains__
    q = plan("send headers from JavaScript to Java", Tokenizer(), CjkBridge(), known, RetrievalConfig())
    assert set(q.terms) == {"send", "header"} and q.text == "send headers from to"
    assert "js" not in plan("a js timer", Tokenizer(), CjkBridge(), known, RetrievalConfig()).terms


def test_a_question_that_names_tests_or_symbols_keeps_test_code() -> None:
    assert asks_for_tests("where do we test retries") and asks_for_tests("Tests that a job is paused")
    assert not asks_for_tests("where do we retry a failed task")
    assert not asks_for_tests("latest contest results")  # whole words only
    cfg, known = RetrievalConfig(), lambda t: True
    assert plan("unit tests of the retry", Tokenizer(), CjkBridge(), known, cfg).tests
    assert plan("who calls retry_task", Tokenizer(), CjkBridge(), known, cfg).tests  # a symbol lookup
    assert not plan("who retries a task", Tokenizer(), CjkBridge(), known, cfg).tests


def test_the_implementation_outranks_its_test_for_a_plain_question(make_repo, cfg, embedder) -> None:
    repo = make_repo({"jobs/retry.py": RETRY_PY, "tests/test_retry.py": TEST_RETRY_PY})
    idx, _ = index_repo(repo, cfg, embedder=embedder)
    question = "where do we retry a failed task"
    assert CodeConfig().retrieval.test_penalty > 0  # on by default (learned on the dev split)
    assert idx.search(question, 3).hits[0].unit.qualname == "retry_task"
    off = cfg.model_copy(update={"retrieval": cfg.retrieval.model_copy(update={"test_penalty": 0.0})})
    idx.cfg = off
    assert idx.search(question, 3).hits[0].unit.qualname == "test_retry_failed_task"  # before: the test
    idx.cfg = cfg
    assert idx.search("tests of retrying a failed task", 3).hits[0].unit.qualname == "test_retry_failed_task"


def test_an_acronym_counts_when_the_repository_uses_it_beside_its_words(make_repo, cfg, embedder) -> None:
    files = {
        "src/I18nUtil.java": RTL_JAVA,
        "src/Cookies.java": COOKIES_JAVA,
        "src/Opcodes.java": OPCODES_JAVA,
    }
    repo = make_repo(files)
    idx, _ = index_repo(repo, cfg, embedder=embedder)
    tok, postings = Tokenizer(), idx.bm25.postings
    assert ("rtl", ["right", "to", "left"]) in acronym_sources("force right-to-left layout")
    # rtl shares units with "right" and "left": it stands for both of them
    assert abbreviation_weight("rtl", ["right", "to", "left"], tok, postings) == 2.0
    assert idx.query_plan("force right-to-left layout").terms["rtl"] == 2.0
    # cac is a token here too, but never beside "clear" or "cookies": chance initials, not an abbreviation
    assert "cac" in idx.bm25.vocab
    assert abbreviation_weight("cac", ["clear", "all", "cookies"], tok, postings) == 0.0
    assert "cac" not in idx.query_plan("clear all cookies").terms
