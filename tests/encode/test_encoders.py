"""The encoders themselves, table-driven: what each rule does, that it is idempotent, and xihe's own markup."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.encode.corpus import HOSTILE, ids, readable
from tests.support.wecom_view import live
from tests.wecom.conftest import BOT_AES_KEY, BOT_TOKEN, Gateway, clock, make_gateway  # noqa: F401
from xihe.agent import email_text, wecom_text
from xihe.agent.i18n import said_md, say_md, text
from xihe.agent.wecom_markdown import Md, Url, block, checked_url, font, inline, link, mention, quote, reply
from xihe.config.wecom import AibotSettings

INLINE = [
    ("[点此](http://e.x/p)", "［点此］(http://e.x/p)"),
    ("![i](http://e.x/i.png)", "!［i］(http://e.x/i.png)"),
    ('<@all> <font color="warning">x</font>', '＜@all＞ ＜font color="warning"＞x＜/font＞'),
    ("# head", "＃ head"),
    ("- item", "－ item"),
    ("1. one", "1． one"),
    ("10.0.0.1:8080 -5", "10.0.0.1:8080 -5"),  # not a list: no blank after the mark
    ("**b** *i* ~~s~~ `c`", "＊＊b＊＊ ＊i＊ ～～s～～ ｀c｀"),
    ("order_sync __init__ _x_", "order_sync ＿＿init＿＿ ＿x＿"),
    ("a && b &lt; &#60;", "a && b ＆lt; ＆#60;"),
    ("ls | grep x", "ls | grep x"),
    ("line1\r\nline2\tend", "line1 line2 end"),
    ("\u202eevil\u200b \x1b[31m", "evil ［31m"),
    ("订单_同步 失败：原因", "订单_同步 失败：原因"),
]


@pytest.mark.parametrize(("raw", "shown"), INLINE, ids=[r[:20] for r, _s in INLINE])
def test_inline_rules(raw: str, shown: str) -> None:
    assert inline(raw) == shown


def test_block_keeps_lines_and_neutralises_each_line_start() -> None:
    assert block("# a\n> b\n- c\n|---|---|\n=====\nok") == "＃ a\n＞ b\n－ c\n｜---｜---｜\n＝====\nok"


@pytest.mark.parametrize(("text", "words"), [c[1:] for c in HOSTILE], ids=ids())
def test_encoders_are_idempotent_and_keep_the_words(text: str, words: tuple[str, ...]) -> None:
    for encode in (inline, block, reply, wecom_text.text):
        once = encode(text)
        assert encode(once) == once, encode.__name__
    for encode in (inline, block):
        out = encode(text)
        assert not live(out), (encode.__name__, out[:300])
        assert all(readable(w) in readable(out) for w in words)


def test_our_own_markup_is_md_and_passes_through() -> None:
    assert inline(Md("**ours**")) == "**ours**" and block(Md("# ours")) == "# ours"
    assert mention("zhangsan") == "<@zhangsan>" and mention("bad id>") == ""
    assert font("warning", "P0") == '<font color="warning">P0</font>'
    assert font("red", "<@all>") == '<font color="comment">＜@all＞</font>'  # WeCom has three colours
    assert quote("a\n# b") == "> a\n> ＃ b"


URLS = [
    ("https://xihe.example/ui/runs/1", ["https://xihe.example"], True),
    ("http://ds.example:12345/dolphinscheduler/ui/x?id=1&a=b", [], True),
    ("https://xihe.example.evil/ui", ["https://xihe.example"], False),  # not under the base
    ("https://xihe.example", ["https://xihe.example/"], True),
    ("javascript:alert(1)", [], False),
    ("data:text/html,x", [], False),
    ("ftp://e.x/f", [], False),
    ("//evil.example/x", [], False),
    ("http://e.x/a b", [], False),
    ("http://e.x/a)[x](http://evil", [], False),  # would end the markdown link early
    ("http:///nohost", [], False),
    ("", [], False),
]


@pytest.mark.parametrize(("url", "bases", "ok"), URLS, ids=[u[:30] or "empty" for u, _b, _o in URLS])
def test_only_a_checked_url_becomes_a_link(url: str, bases: list[str], ok: bool) -> None:
    checked = checked_url(url, bases)
    assert (checked is not None) == ok
    shown = link("日志", checked if checked is not None else url)
    assert (("link", url) in live(shown)) == ok
    if not ok:
        assert not live(shown)


def test_a_plain_string_is_never_a_link() -> None:
    assert link("x", "https://xihe.example/a") == "https://xihe.example/a"
    assert isinstance(checked_url("https://xihe.example/a"), Url)


def test_reply_keeps_formatting_but_nothing_live() -> None:
    text = '## 结果\n**成功** `x` > q\n[点此](http://evil.example) <@all> <font color="info">x</font> &#60;b&#62;'
    found = live(reply(text))
    assert {k for k, _d in found} == {"heading", "bold", "code"}


def test_say_md_encodes_values_but_not_the_catalog_or_md_values() -> None:
    catalog = {"m": {"en": "**{name}** ran {n:.1f}s `{cmd}` {more}", "zh": "**{name}** 用时 {n:.1f} 秒"}}
    out = say_md(catalog, "m", "en", name="[x](http://evil)", n=1.25, cmd="`rm`", more=Md("*ok*"))
    assert out == "**［x］(http://evil)** ran 1.2s `｀rm｀` *ok*"
    assert isinstance(out, Md)


def test_email_subject_is_one_short_line() -> None:
    assert email_text.subject("a\r\nBcc: x@evil\tb\u202e") == "a Bcc: x@evil b"
    assert len(email_text.subject("长" * 500)) == 200


def test_email_parts_read_our_markup_and_escape_the_rest() -> None:
    md = '<@ops> \n## <font color="warning">P0</font> 失败：＜script＞\n> log & <b>\n[运行详情](https://x.example/r)'
    assert email_text.plain(md) == "@ops \nP0 失败：＜script＞\n> log & <b>\n运行详情 <https://x.example/r>"
    html = email_text.html(md)
    assert '<a href="https://x.example/r">运行详情</a>' in html and "log &amp; &lt;b&gt;" in html
    assert '<span style="color:#e65100">P0</span>' in html and "<script" not in html


def test_the_ai_bot_welcome_from_yaml_is_a_text_message_that_pages_nobody(
    make_gateway: Callable[..., Gateway],  # noqa: F811
) -> None:
    hostile = "欢迎 <@all> [点此](http://evil.example) \u202e"
    gw = make_gateway(aibot=AibotSettings(token=BOT_TOKEN, aes_key=BOT_AES_KEY, welcome_text=hostile))
    bot = gw.bot_sender()
    event = {"msgid": "e-1", "aibotid": "bot1", "from": {"userid": "alice"}, "msgtype": "event"}
    resp, nonce = bot.post_aibot({**event, "event": {"eventtype": "enter_chat"}})
    answer = bot.open_reply(resp.json(), nonce)
    assert answer == {"msgtype": "text", "text": {"content": "欢迎 ＜@all> [点此](http://evil.example) "}}


def test_said_md_keeps_each_catalogs_markup_and_encodes_every_value() -> None:
    inner = text({"i": {"en": "`{name}` failed", "zh": "`{name}` 失败"}}, "i", name="[x](http://evil)")
    outer = text({"o": {"en": "**{what}**: {why}"}}, "o", what=inner, why=("<@all>", inner))
    assert said_md(outer, "zh") == "**`［x］(http://evil)` 失败**: ＜@all＞；`［x］(http://evil)` 失败"
    assert str(outer).startswith("**`[x](http://evil)` failed**")  # the model and the audit keep it raw
