"""Query understanding and the Chinese bridge: weighted terms, dictionary senses the code uses, Chinese comments."""

from __future__ import annotations

from xihe.config.code import CodeConfig, RetrievalConfig
from xihe.tools.codeindex.bridge import CjkBridge
from xihe.tools.codeindex.query import is_identifier, plan
from xihe.tools.codeindex.service import index_dir, index_repo, open_index
from xihe.tools.codeindex.tokens import Tokenizer

BRIDGE = CjkBridge()

BACKFILL_PY = '''
def compute_dates(start, end):
    # 补数任务的日期区间在这里展开成每天一个
    return [start, end]


def retry_failed_task(task):
    """Run a task again after it did not succeed."""
    return task


def render_page(html):
    """Turn a template into a page."""
    return html
'''

CLIP_JAVA = """package demo;

public class ClipboardModule {
    public void setString(String text) { service.put(text); }
}

public class Notes {
    /** Writes the text of the clipboard entry, the clipboard history and the text buffer to disk. */
    public void save(String text) { disk.write(text); }
}
"""


def test_every_sense_counts_but_only_words_the_code_uses() -> None:
    # CC-CEDICT: 失败 "to be defeated/to lose/to fail/failure/defeat": the code says fail
    assert BRIDGE.weighted(["失败"], {"fail", "failure"}.__contains__) == {"fail": 1.0, "failure": 0.5}
    assert BRIDGE.weighted(["失败"], {"render"}.__contains__) == {}


def test_unknown_words_split_into_known_parts_and_agent_nouns() -> None:
    assert BRIDGE.candidates("后台任务") == []
    assert BRIDGE.split_unknown("后台任务") == ["后台", "任务"]
    got = BRIDGE.weighted(["后台任务"], {"background", "task"}.__contains__)
    assert got == {"background": 1.0, "task": 1.0}
    # 器 ("device") after a verb is its agent noun: 监听 "to monitor/to listen in" + 器 -> listener
    assert BRIDGE.weighted(["监听器"], {"listener", "device"}.__contains__) == {"listener": 1.0}


def test_a_single_character_gives_its_first_known_sense_at_half_weight() -> None:
    assert BRIDGE.weighted(["切"], {"cut", "slice"}.__contains__) == {"cut": 0.5}


def test_domain_words_the_dictionary_gets_wrong() -> None:
    assert BRIDGE.candidates("补数")[0] == "backfill"  # CC-CEDICT: "complementary number"
    assert BRIDGE.candidates("告警")[0] == "alert"


def test_question_words_are_dropped_and_typed_identifiers_weigh_more() -> None:
    cfg = RetrievalConfig(identifier_weight=2.0)
    q = plan("where do we call retryTask", Tokenizer(), BRIDGE, lambda t: True, cfg)
    assert q.terms == {"call": 1.0, "retrytask": 2.0, "retry": 2.0, "task": 2.0}
    assert q.text == "do call retryTask"  # stop words stay for the embedder; question words go
    plain = plan("Parse the header.", Tokenizer(), BRIDGE, {"parse", "header"}.__contains__, cfg)
    assert plain.text == "Parse the header." and plain.terms == {"parse": 1.0, "header": 1.0}
    assert plan("Parse the header.", Tokenizer(), BRIDGE, lambda t: True, cfg).terms["pth"] == 1.0  # initials
    assert is_identifier("get_due_jobs") and is_identifier("HTTPServer") and not is_identifier("server")


def test_chinese_words_stay_as_terms_and_bridge_with_their_weight() -> None:
    cfg = RetrievalConfig(bridge_weight=0.5)
    q = plan("重试失败的任务", Tokenizer(), BRIDGE, {"retry", "fail", "task"}.__contains__, cfg)
    assert {"重试", "失败", "任务"} <= set(q.terms)
    assert q.terms["retry"] == 0.5 and q.terms["fail"] == 0.5 and q.terms["task"] == 0.5
    assert q.text.split() == ["retry", "fail", "task"]
    off = plan("重试失败的任务", Tokenizer(), BRIDGE, lambda t: True, RetrievalConfig(cjk_bridge=False))
    assert "retry" not in off.terms and q.text != off.text


def test_chinese_comments_and_chinese_questions_find_code(make_repo, cfg, embedder) -> None:
    repo = make_repo({"jobs.py": BACKFILL_PY})
    idx, _ = index_repo(repo, cfg, embedder=embedder, full=True)
    # a Chinese comment is segmented at index time, so a Chinese question meets it
    assert idx.search("补数日期在哪里展开", 3, mode="bm25").hits[0].unit.qualname == "compute_dates"
    # an English-only function is reached through the dictionary bridge
    assert idx.search("重试失败的任务", 3, mode="bm25").hits[0].unit.qualname == "retry_failed_task"
    off = idx.cfg.model_copy(update={"retrieval": RetrievalConfig(cjk_bridge=False)})
    idx.cfg = off
    assert all(
        h.unit.qualname != "retry_failed_task" for h in idx.search("重试失败的任务", 3, mode="bm25").hits
    )


def test_the_name_field_lifts_units_named_after_the_question(make_repo, tmp_path, embedder) -> None:
    repo = make_repo({"Clip.java": CLIP_JAVA})
    plain = CodeConfig(index_dir=str(tmp_path / "index"))
    named = plain.model_copy(update={"retrieval": RetrievalConfig(name_weight=1.0, vector_weight=0.0)})
    unnamed = plain.model_copy(update={"retrieval": RetrievalConfig(name_weight=0.0, vector_weight=0.0)})
    idx, _ = index_repo(repo, unnamed, embedder=embedder)
    assert idx.search("copy text to the clipboard", 2).hits[0].unit.qualname == "Notes.save"
    idx.save()
    again = open_index(repo, named, embedder)
    assert again is not None and (index_dir(repo, named) / "names.npys").exists()
    top = again.search("copy text to the clipboard", 2).hits[0].unit
    assert top.path == "Clip.java" and top.qualname.startswith("ClipboardModule")


def test_term_weights_do_not_lift_a_question_over_the_relevance_floor(make_repo, cfg, embedder) -> None:
    repo = make_repo({"jobs.py": BACKFILL_PY})
    idx, _ = index_repo(repo, cfg, embedder=embedder, full=True)

    def search(bridge_weight: float, floor: float):  # type: ignore[no-untyped-def]
        r = RetrievalConfig(bridge_weight=bridge_weight, min_bm25_score=floor, min_vector_score=2.0)
        idx.cfg = idx.cfg.model_copy(update={"retrieval": r})
        return idx.search("重试失败的任务", 3)

    floor = search(1.0, 0.0).best_bm25 * 1.2  # just above what the unweighted question scores
    assert not search(1.0, floor).relevant
    heavy = search(3.0, floor)
    assert heavy.best_bm25 > floor  # the weights raise the raw score past the floor ...
    assert not heavy.relevant  # ... but not the judgement
