"""A catalog `Text` is said later in any language: English for the model and the audit, the
conversation's language for people; nested texts and lists follow the same language."""

from __future__ import annotations

import pytest

from xihe.agent.errors import DolphinError, ToolFailed
from xihe.agent.i18n import Catalog, Text, say, text

C: Catalog = {
    "outer": {
        "en": "cannot run {name}: {why}; closest {names}",
        "zh": "无法运行 {name}：{why}；最接近的 {names}",
    },
    "why": {"en": "it is {state}", "zh": "它{state}"},
    "label": {"en": "{name} (project {project})", "zh": "{name}（项目 {project}）"},
}


def test_a_text_is_english_by_str_and_any_language_by_in() -> None:
    labels = (text(C, "label", name="a", project="p"), text(C, "label", name="b", project="p"))
    t = text(C, "outer", name="x", why=text(C, "why", state="offline"), names=labels)
    assert str(t) == "cannot run x: it is offline; closest a (project p); b (project p)"
    assert t.in_("zh") == "无法运行 x：它offline；最接近的 a（项目 p）；b（项目 p）"
    assert say(C, "why", "zh", state=text(C, "label", name="n", project="q")) == "它n（项目 q）"


def test_an_unknown_key_fails_when_the_text_is_made() -> None:
    with pytest.raises(KeyError, match="nosuch"):
        text(C, "nosuch")


def test_errors_keep_their_english_and_carry_the_text() -> None:
    exc = ToolFailed(text(C, "why", state="gone"))
    assert str(exc) == "it is gone" and exc.said("zh") == "它gone" and isinstance(exc.text, Text)
    assert ToolFailed("plain").said("zh") == "plain"  # no catalog text: the English as it is
    ds = DolphinError("GET /x: DS error 1: boom", code=1).explained(text(C, "why", state="down"))
    assert str(ds) == "GET /x: DS error 1: boom" and ds.said("zh") == "它down"
