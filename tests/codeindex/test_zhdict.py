"""Prebuilt Chinese dictionaries (zhdict.py): a question segments and bridges exactly as with the
whole jieba and CC-CEDICT loaded, and a loaded index reads them instead of loading either."""

from __future__ import annotations

import re
from pathlib import Path

import jieba
import pytest

from xihe.tools.codeindex import zhdict
from xihe.tools.codeindex.bridge import CjkBridge
from xihe.tools.codeindex.service import index_repo
from xihe.tools.codeindex.tokens import Tokenizer
from xihe.tools.codeindex.zhdict import ZhDict, ZhSource, load_cedict

QUESTIONS = [
    "弹出警告对话框",
    "cron 表达式的下一次触发时间",
    "重新执行失败的工作流实例并且补数",
    "在哪里注册监听器",
    "如何取消订单",
]


@pytest.fixture(scope="module")
def prebuilt(tmp_path_factory: pytest.TempPathFactory) -> ZhDict:
    path = zhdict.ensure(tmp_path_factory.mktemp("zh"))
    assert path is not None and path.exists()
    return ZhDict(path)


def test_segmenting_with_the_prebuilt_frequencies_equals_jieba(prebuilt: ZhDict) -> None:
    whole = jieba.Tokenizer()
    for q in QUESTIONS:
        for run in re.findall(r"[\u4e00-\u9fff]+", q):
            assert prebuilt.segment(run) == whole.lcut(run), run


def test_the_bridge_gives_the_same_terms_from_the_prebuilt_senses(prebuilt: ZhDict, tmp_path: Path) -> None:
    full = load_cedict()
    for word in ["警告", "对话框", "监听", "订单", "触发"]:
        assert prebuilt.senses.get(word) == full[word]
    assert prebuilt.senses.get("不是一个词语") is None
    source = ZhSource(tmp_path)
    source._opened, source._tried = prebuilt, True
    tokens_fast, tokens_slow = Tokenizer(source), Tokenizer()
    fast, slow = CjkBridge(zh=source), CjkBridge()
    for q in QUESTIONS:
        words = tokens_fast.cjk_words(q)
        assert words == tokens_slow.cjk_words(q)
        assert fast.weighted(words, lambda w: True) == slow.weighted(words, lambda w: True)
    assert slow._cedict is not None and fast._cedict is prebuilt.senses


def test_a_loaded_index_answers_a_chinese_question_from_the_shared_file(
    make_repo, cfg, embedder, shared_cache_dir: Path
) -> None:
    root = make_repo({"shop/orders.py": 'def cancel_order(order):\n    """Cancel the order."""\n'})
    index_repo(root, cfg, embedder=embedder)
    idx, _ = index_repo(root, cfg, embedder=embedder)  # loaded from disk, as `xihe search` does
    hit = idx.search("取消订单", 1).hits[0]
    assert hit.unit.qualname == "cancel_order"
    assert idx.tokenizer._jieba is None  # the whole dictionary was never loaded
    assert zhdict.path_in(shared_cache_dir).exists()


def test_an_unwritable_cache_falls_back_to_the_whole_dictionaries(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    source = ZhSource(blocker / "cache")
    assert source.get() is None
    words = Tokenizer(source).cjk_words("在哪里注册监听器")
    assert words == Tokenizer().cjk_words("在哪里注册监听器") and "监听器" in words


def test_jieba_is_imported_without_pkg_resources_and_segments_the_same(tmp_path: Path) -> None:
    """`zhdict.jieba_module` keeps pkg_resources (~10 MB, every distribution's metadata) out of the
    process; jieba then reads its data files by path: the same words as jieba imported as usual."""
    import subprocess
    import sys

    text = "弹出警告对话框并重试失败的任务"
    code = (
        "import sys; from xihe.tools.codeindex.zhdict import jieba_module; j = jieba_module(); "
        f"print('pkg_resources' in sys.modules, '|'.join(j.lcut({text!r})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert out.stdout.split() == ["False", "|".join(jieba.lcut(text))]
