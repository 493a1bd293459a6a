"""WeCom markdown, the destination of alerts and chat replies: outside text made inert, our own markup kept.

What WeCom renders, and so what this module relies on (WeCom's 消息推送 and 发送应用消息 pages):
- robot `markdown` (v1): `#`..`######` headings at a line start, `**bold**`, `[text](url)` links,
  `` `code` ``, `> quote`, `<font color="info|comment|warning">`, and `<@userid>` mentions;
- robot `markdown_v2` and the AI bot's stream/response_url markdown add `*italic*`, lists, tables,
  `---`, fenced code and images `![](url)` (no font, no mention);
- the app's `message/send` markdown: v1's subset without mentions;
- backslash escapes are NOT honoured (`\\[` is not an escaped bracket), and no escaping rule is
  documented at all. So a character is made inert by swapping it for its full-width twin, which
  reads the same to people and is no syntax to any renderer.

Outside text (DS names and errors, log lines, shell output, code, user text, YAML values) goes through
`inline` (one line) or `block` (keeps line breaks). Rules, for every WeCom markdown flavour:
- dropped: control characters (C0 but tab and newline, DEL, C1), U+2028/2029, bidirectional
  overrides and isolates (U+202A-202E, U+2066-2069) and the invisible U+200B, U+2060, U+FEFF
  (joiners stay: emoji need them); `inline` folds every run of white space into one space;
- `<` `>` become `＜` `＞`: no tag, `<@mention>`, `<font>`, HTML or `<http://…>` autolink survives;
- `[` `]` become `［` `］`: no link, image or reference link can open;
- `` ` `` becomes `｀` (no code span or fence), `*` `＊`, `~` `～`; `&` becomes `＆` where it
  would start an entity (`&lt;`, `&#60;`), so `a && b` stays; `_` becomes `＿` unless it sits
  between two letters or digits (`order_sync` stays);
- a table's delimiter row (`|---|:--|`, only `|`, `-`, `:` and blanks) gets `｜`, so no table
  forms; a `|` anywhere else stays (`ls | grep`);
- at a line start, `#` becomes `＃`, a list mark (`-`, `+`, `1.`, `1)` before a blank) its
  full-width twin, and a line of `-` or `=` starts with `－` / `＝` (no heading, list, rule or
  setext underline); `10.0.0.1` or `-5` at a line start stay as written.
Every rule maps to characters no rule maps from, so encoding twice changes nothing.

Markup xihe writes itself is `Md` (a `str` that encoders pass through): a mention of a configured
user id, a colour from the three WeCom has, and a link whose address is a `Url` (http/https,
composed from configured parts and checked). A chat reply (text xihe and the model composed, with
outside text already encoded) goes through `reply`, which keeps its formatting but can carry no
link, image, mention, colour, tag or entity from anyone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from urllib.parse import urlsplit

_DROP = re.compile(
    r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200b\u2060\ufeff]"
)
_SWAP = str.maketrans({"<": "＜", ">": "＞", "[": "［", "]": "］", "`": "｀", "*": "＊", "~": "～"})
_UNDERSCORE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")  # not between two letters/digits
# a heading mark; a list mark followed by a blank; a line of - or = (setext underline, rule)
_LINE_START = re.compile(r"^([ \t]*)(#|[-+](?=[ \t]|$)|\d+[.)](?=[ \t]|$)|[=-](?=[=-]*[ \t]*$))", re.M)
_FULL = {"#": "＃", "-": "－", "+": "＋", "=": "＝", ".": "．", ")": "）"}
_SPACE = re.compile(r"[ \t\n\r\f\v]+")
_USERID = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")
COLORS = ("info", "comment", "warning")  # the only colours WeCom's <font> knows
_URL_SAFE = re.compile(r"^[^\s()<>\[\]`\"'\\]+$")
_ENTITY = re.compile(r"&(?=#?\w+;)")
_TABLE_RULE = re.compile(r"^(?=[^\n]*\|)(?=[^\n]*-)[ \t|:-]+$", re.M)


class Md(str):
    """Markup xihe wrote itself: encoders pass it through unchanged."""


class Url(str):
    """An http(s) address composed from configured parts and checked (`checked_url`): may be a link."""


def _line_start(m: re.Match[str]) -> str:
    lead, mark = m.group(1), m.group(2)
    return lead + mark[:-1] + _FULL[mark[-1]]


def drop_invisible(text: str) -> str:
    """`text` without control characters (but tab and newline), bidi overrides and invisible spaces."""
    return _DROP.sub("", text)


def _swap(text: str) -> str:
    text = _ENTITY.sub("＆", drop_invisible(text).translate(_SWAP))
    text = _TABLE_RULE.sub(lambda m: m.group(0).replace("|", "｜"), text)
    return _UNDERSCORE.sub("＿", text)


def inline(value: object) -> str:
    """Outside text for one line of WeCom markdown: inert, white space folded; `Md` passes through."""
    if isinstance(value, Md):
        return value
    return _inline(value if type(value) is str else str(value))


@lru_cache(maxsize=4096)
def _inline(text: str) -> str:
    """`inline` of plain text; memoized, a pure function of `text` (an alert storm renders the same
    workflow names, hosts and errors hundreds of times; issue 30). Only exact `str` reaches it: an
    `Md` equal to a plain string must never share its entry."""
    text = _SPACE.sub(" ", _swap(text)).strip()
    return _LINE_START.sub(_line_start, text)


def block(value: object) -> str:
    """Outside text of several lines for WeCom markdown: inert, line breaks kept; `Md` passes through."""
    if isinstance(value, Md):
        return value
    text = str(value).replace("\r\n", "\n").replace("\r", "\n")
    return _LINE_START.sub(_line_start, _swap(text))


def quote(value: object) -> Md:
    """Outside text as a quoted block (`> ` per line), e.g. a log tail."""
    lines = block(value).strip("\n").split("\n")
    return Md("\n".join(f"> {line}" if line.strip() else ">" for line in lines))


def mention(userid: object) -> Md:
    """`<@userid>` for a well-formed WeCom user id (from config), else nothing."""
    uid = str(userid)
    return Md(f"<@{uid}>") if _USERID.match(uid) else Md("")


def font(color: str, value: object) -> Md:
    """`value` in one of WeCom's three colours (`comment` when `color` is not one of them)."""
    shade = color if color in COLORS else "comment"
    return Md(f'<font color="{shade}">{inline(value)}</font>')


def checked_url(url: object, bases: Iterable[str] = ()) -> Url | None:
    """`url` as a `Url` when it is http(s) with a host, holds nothing that ends a markdown link, and
    (when `bases` are given) starts with one of them; else None."""
    text = str(url or "")
    if not _URL_SAFE.match(text):
        return None
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    allowed = [b.rstrip("/") for b in bases if b]
    if bases and not any(text == b or text.startswith(b + "/") for b in allowed):
        return None
    return Url(text)


def link(label: str, url: object) -> Md:
    """`[label](url)` when `url` is a checked `Url`; any other address is shown as inert text."""
    if isinstance(url, Url):
        return Md(f"[{inline(label)}]({url})")
    return Md(inline(url or ""))


def reply(text: str) -> str:
    """A chat reply made safe for any WeCom markdown: formatting kept (headings, bold, code, quotes,
    lists), but no link, image, mention, colour, HTML tag or entity, whoever wrote it."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _ENTITY.sub("＆", drop_invisible(text).translate(_REPLY))


_REPLY = str.maketrans({"<": "＜", "[": "［", "]": "］"})
