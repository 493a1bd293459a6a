"""What a WeCom client would make live in a markdown message: the tests' reader, independent of the encoder.

It is deliberately generous: anything any WeCom renderer (robot `markdown`, `markdown_v2`, the app's
markdown, the AI bot's stream) or a CommonMark-like parser could turn into a link, an image, a
mention, a coloured span, an HTML tag, a heading, emphasis, code, a list, a table or an entity is
reported. Tests compare what a message holds with a harmless value against what it holds with a
hostile one: the hostile value must add nothing.
"""

from __future__ import annotations

import re
from collections import Counter

_LINE_RULES = {
    "heading": re.compile(r"^ {0,3}#{1,6}(?:[ \t]|$)", re.M),
    "setext": re.compile(r"^ {0,3}(?:=+|-{2,})[ \t]*$", re.M),
    "list": re.compile(r"^[ \t>]*(?:[-+*]|\d{1,9}[.)])[ \t]", re.M),
    "table": re.compile(r"^(?=[^\n]*\|)(?=[^\n]*-)[ \t|:-]+$", re.M),  # a delimiter row makes a table
    "rule": re.compile(r"^ {0,3}(?:(?:\*[ \t]*){3,}|(?:_[ \t]*){3,}|(?:-[ \t]*){3,})$", re.M),
    "fence": re.compile(r"^ {0,3}(?:```|~~~)", re.M),
    "nested_quote": re.compile(r"^ {0,3}>[ \t]*>", re.M),
    "ref_definition": re.compile(r"^ {0,3}\[[^\]\n]+\]:", re.M),
}
_SPAN_RULES = {
    "bold": re.compile(r"\*\*(?=\S)[^\n]*?\S\*\*|__(?=\S)[^\n]*?\S__"),
    "italic": re.compile(
        r"(?<![*\w])\*(?=[^\s*])[^*\n]*?[^\s*]\*(?![*\w])|(?<!\w)_(?=[^\s_])[^_\n]*?[^\s_]_(?!\w)"
    ),
    "strike": re.compile(r"~~(?=\S)[^\n]*?\S~~"),
    "code": re.compile(r"`[^`\n]+`"),
    "entity": re.compile(r"&(?:#\d+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);"),
}
_LINK = re.compile(r"(!?)\[((?:[^\[\]\n]|\[[^\]\n]*\])*)\][ \t]*\(([^)\n]*)\)")
_REF_LINK = re.compile(r"\[[^\]\n]+\][ \t]*\[[^\]\n]*\]")
_TAG = re.compile(r"<[ \t]*(/?)[ \t]*([A-Za-z@!?][^<>\n]*)>")
_INVISIBLE = re.compile(r"[\u200b-\u200f\u2060\ufeff\u202a-\u202e\u2066-\u2069]")


def live(content: str) -> Counter[tuple[str, str]]:
    """Every construct a client could render in `content`, as (kind, detail) with a count.

    Links, images, mentions, tags and entities carry their target; layout constructs only their kind.
    Invisible characters are dropped first (a renderer may ignore them between `]` and `(`).
    """
    text = _INVISIBLE.sub("", content.replace("\r\n", "\n").replace("\r", "\n"))
    found: Counter[tuple[str, str]] = Counter()
    for bang, _label, target in _LINK.findall(text):
        found["image" if bang else "link", target.strip()] += 1
    for _m in _REF_LINK.findall(text):
        found["ref_link", ""] += 1
    for close, body in _TAG.findall(text):
        name = body.strip()
        if name.startswith("@"):
            found["mention", name[1:].strip()] += 1
        elif re.match(r"(?i)https?:|mailto:|[\w.+-]+@", name):
            found["autolink", name] += 1
        else:
            found["tag", close + re.split(r"[\s>]", name, maxsplit=1)[0].lower()] += 1
    for kind, rule in {**_LINE_RULES, **_SPAN_RULES}.items():
        n = len(rule.findall(text))
        if n:
            found[kind, ""] += n
    return found


def added(hostile: str, benign: str) -> Counter[tuple[str, str]]:
    """What `hostile` makes live that `benign` (the same message with a harmless value) does not."""
    return live(hostile) - live(benign)
