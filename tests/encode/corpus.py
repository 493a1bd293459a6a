"""Hostile strings: outside text (DS names and errors, log lines, shell output, code, user text, YAML
values) written to become live markup, hide itself, or break out of its place.

Each entry is (id, text, words): `words` must still be readable in what the destination received,
compared after NFKC normalisation (which folds the full-width twins an encoder uses back to ASCII).
"""

from __future__ import annotations

import re
import unicodedata

PHISH = "[点此处理](http://evil.example/phish)"

HOSTILE: list[tuple[str, str, tuple[str, ...]]] = [
    ("link", PHISH, ("点此处理", "evil.example/phish")),
    ("image", "![x](http://evil.example/pixel.png)", ("evil.example/pixel.png",)),
    ("nested_link", "[a [b] c](http://evil.example/n)", ("evil.example/n",)),
    ("ref_link", "[点此][1]\n\n[1]: http://evil.example/ref", ("点此", "evil.example/ref")),
    ("js_link", "[点我](javascript:alert(1))", ("javascript:alert(1)",)),
    ("autolink", "<http://evil.example/auto>", ("evil.example/auto",)),
    ("mention_all", "<@all> 请立即处理", ("@all", "请立即处理")),
    ("mention_user", "<@zhangsan><@lisi>", ("@zhangsan", "@lisi")),
    ("font", '<font color="warning">已恢复，无需处理</font>', ("已恢复，无需处理",)),
    ("heading", "# ✅ 已修复", ("已修复",)),
    ("bold", "**紧急** 请点击", ("紧急", "请点击")),
    ("emphasis", "*斜体* _下划线_ __粗__ ~~删除~~", ("斜体", "下划线", "删除")),
    ("code", "`rm -rf /` ```\nfenced\n```", ("rm -rf /", "fenced")),
    ("quote", "> 引用 ok\n>> nested", ("引用 ok",)),
    ("list_table", "- item\n1. first\n| a | b |\n|---|---|", ("item", "first")),
    ("html_link", '<a href="http://evil.example/a">click</a>', ("click", "evil.example/a")),
    ("script", "<script>alert(1)</script><img src=x onerror=alert(2)>", ("alert(1)",)),
    ("entity", "&lt;@all&gt; &#60;font color=&quot;warning&quot;&#62;x", ("lt;@all",)),
    ("crlf", "ok\r\n## 注入标题\r\n[点此](http://evil.example/crlf)\rBcc: x@evil.example", ("注入标题",)),
    (
        "zero_width",
        "[点\u200b此](http://evil\u200b.example/zw) <\u200b@all> [x]\u200b(http://evil.example/z2)",
        ("点此",),
    ),
    ("bidi", "\u202ehsihp/elpmaxe.live//:ptth\u202c ok", ("ok",)),
    ("controls", "a\x00b\x07c\x1b[31mred\x1b[0m\x7fd", ("red",)),
    ("backslash", "\\[x\\](http://evil.example/bs)", ("evil.example/bs",)),
    (
        "mixed_zh",
        "订单同步失败，详情见[日志](http://evil.example/log)——请@所有人 <@all> **马上**",
        ("订单同步失败",),
    ),
    ("long", (PHISH + " <@all> ") * 400, ("点此处理",)),
]


INVISIBLE = re.compile(r"[\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")


def readable(received: str) -> str:
    """`received` as a person reads it: invisible characters gone, full-width twins folded back (NFKC)."""
    return unicodedata.normalize("NFKC", INVISIBLE.sub("", received))


def ids() -> list[str]:
    """Test ids of the corpus."""
    return [case[0] for case in HOSTILE]
