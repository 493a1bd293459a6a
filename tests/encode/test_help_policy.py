"""The hostile corpus in /help, /help sh and /policy: a typed topic or name, a user id and shell.yaml's
templates and descriptions are outside text; what they say must stay words, never markup.

/help and /policy answer through the real Session (`make_app`); /help sh's lines are checked where
they are composed (`help_text`) over a whitelist entry whose YAML carries the hostile text.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.conftest import MakeApp
from tests.encode.corpus import HOSTILE, ids, readable
from tests.support.wecom_view import added
from xihe.agent.inbound import Inbound
from xihe.config.shell.entry import Entry
from xihe.tools.shell.policy import Runnable, help_text

ONE_LINE = [c[1:] for c in HOSTILE if len(c[1]) < 400]


def words_shown(received: str, text: str, words: tuple[str, ...]) -> bool:
    """Every word survives (white space folded: a typed name is one word)."""
    shown = "".join(readable(received).split())
    return all("".join(readable(w).split()) in shown for w in words)


@pytest.mark.parametrize(("text", "words"), ONE_LINE, ids=[c[0] for c in HOSTILE if len(c[1]) < 400])
def test_a_typed_help_topic_or_policy_name_adds_no_markup(
    make_app: MakeApp, text: str, words: tuple[str, ...]
) -> None:
    app = make_app()

    def ask(user: str, line: str) -> str:
        return app.session.handle(Inbound(user, f"c-{user}", line))

    one = "".join(text.split())  # a command reads one word: the whole text, its blanks taken out
    for benign, hostile in (
        (ask("alice", "/help nosuchthing"), ask("alice", f"/help {one}")),
        (ask("dave", "/policy nosuchthing"), ask("dave", f"/policy {one}")),
    ):
        assert added(hostile, benign) == Counter(), hostile
        assert words_shown(hostile, one, words), hostile


def entry(value: str) -> Entry:
    return Entry(name="say", description=value, argv=["echo", "--", value])


@pytest.mark.parametrize(("text", "words"), [c[1:] for c in HOSTILE], ids=ids())
def test_shell_yaml_text_in_help_sh_adds_no_markup(text: str, words: tuple[str, ...]) -> None:
    for lang in ("en", "zh"):
        benign = help_text([Runnable(entry("prints a greeting"), ("test",), True)], lang)
        hostile = help_text([Runnable(entry(text), ("test",), True)], lang)
        assert added(hostile, benign) == Counter(), hostile
        assert all(readable(w) in readable(hostile) for w in words if len(text) < 2000), hostile
        assert "`/sh echo -- " in hostile  # the template stays a code span people can copy
