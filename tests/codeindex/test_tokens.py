"""Code-aware tokenisation: identifiers split and kept whole, CJK segmented, stop words dropped."""

from __future__ import annotations

import logging

from xihe.tools.codeindex.tokens import Tokenizer, split_identifier


def test_split_identifier_handles_camel_snake_acronyms_and_digits() -> None:
    assert split_identifier("parseHTTPHeader_v2") == ["parse", "http", "header", "v", "2"]
    assert split_identifier("OrderStateMachine") == ["order", "state", "machine"]
    assert split_identifier("__init__") == ["init"]


def test_identifiers_are_kept_whole_and_split_lowercased() -> None:
    toks = Tokenizer().tokens("def onTimeout(self, raw_headers): OrderStateMachine")
    assert "ontimeout" in toks and "timeout" in toks and "on" not in toks  # "on" is a stop word
    assert "raw_headers" in toks and "raw" in toks and "header" in toks  # plural folded
    assert "orderstatemachine" in toks and "machine" in toks
    assert "self" not in toks and "def" not in toks


def test_stop_words_dropped() -> None:
    assert Tokenizer().tokens("how is the value of the header returned") == ["header", "returned"]


def test_chinese_is_segmented_and_question_words_dropped(caplog) -> None:
    with caplog.at_level(logging.DEBUG):
        toks = Tokenizer().tokens("订单超时之后状态是怎么流转的")
    assert toks == ["订单", "超时", "状态", "流转"]
    assert not [r for r in caplog.records if r.name == "jieba"]  # jieba's loading chatter is silenced


def test_mixed_chinese_and_code() -> None:
    toks = Tokenizer().tokens("decode_header 函数怎么解码邮件头")
    assert "decode_header" in toks and "decode" in toks and "解码" in toks
