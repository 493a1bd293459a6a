"""Replies in the user's language: which language a message is in, and message catalogs to say things in.

A catalog maps a key to one template per language; `say(catalog, key, lang, **values)` fills it.
Commands are mostly ASCII (`/help`), so a command is answered in the language of the conversation:
that of the user's last free-text message in it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from xihe.agent.wecom_markdown import Md, inline

Lang = Literal["en", "zh"]
LANGS: tuple[Lang, ...] = ("en", "zh")
CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
Catalog = Mapping[str, Mapping[Lang, str]]


WORD = re.compile(r"(?<![\w-])[A-Za-z]{2,}(?![\w-])")  # an English word; not an identifier like order_sync


def lang_of(text: str) -> Lang | None:
    """`zh` when Chinese characters outweigh English words (a name such as 坏任务 in an English
    sentence leaves it English: two characters count as one word), `en` when English words remain,
    None for neither. Commands and `code` are not read."""
    prose = re.sub(r"/\w+|`[^`]*`", " ", text)
    chinese, english = len(CJK.findall(prose)), len(WORD.findall(prose))
    if chinese and chinese >= 2 * english:
        return "zh"
    if english:
        return "en"
    return None


def lang_for(text: str, earlier: Callable[[], Iterable[str]], default: Lang = "en") -> Lang:
    """The language of `text`, else of the latest `earlier()` message that has one (read only when
    needed: most messages name their language themselves), else `default`."""
    found = lang_of(text)
    if found == "en" and text.lstrip().startswith("/"):
        found = None  # a command's Latin arguments (`/sh git log`) are names, not English; Chinese ones are
    if found is not None:
        return found
    return next((lang for lang in map(lang_of, earlier()) if lang is not None), default)


def say(catalog: Catalog, key: str, lang: Lang, /, **values: object) -> str:
    """The `key` message in `lang` (English when the catalog lacks that language), filled with `values`
    (a `Text` value said in `lang` too)."""
    entry = catalog[key]
    shown = {k: v.in_(lang) if isinstance(v, Text) else v for k, v in values.items()}
    return (entry.get(lang) or entry["en"]).format(**shown)


def say_md(catalog: Catalog, key: str, lang: Lang, /, **values: object) -> Md:
    """`say` for a message people read as WeCom markdown (chat replies): the catalog's text is xihe's
    own markup, and every value that is not `Md` (another message said this way) or a number is
    outside text, encoded for one line (`wecom_markdown.inline`: it can link, mention or format nothing)."""
    shown = {k: v if isinstance(v, Md | int | float) else inline(_said(v, lang)) for k, v in values.items()}
    return Md(say(catalog, key, lang, **shown))


def said_md(message: str | Text, lang: Lang) -> Md:
    """A message for people as WeCom markdown: a `Text` keeps its catalog's markup with every value
    (nested messages too) encoded as outside text; a plain string is outside text as a whole."""
    if isinstance(message, Text):
        values = {k: _md_value(v, lang) for k, v in message.values.items()}
        return say_md(message.catalog, message.key, lang, **values)
    return Md(inline(message))


def _md_value(value: object, lang: Lang) -> object:
    if isinstance(value, Text):
        return said_md(value, lang)
    if isinstance(value, tuple):
        return Md(
            ("；" if lang == "zh" else "; ").join(
                said_md(v if isinstance(v, Text) else str(v), lang) for v in value
            )
        )
    return value


@dataclass(frozen=True, eq=False)
class Text:
    """A catalog message with its values, said later in whichever language is asked: English for the
    model and the audit (`str()`), the conversation's language for people (`in_(lang)`). A value that
    is itself a `Text` is said in the same language; a tuple of values is a list (`a; b` / `a；b`)."""

    catalog: Catalog
    key: str
    values: Mapping[str, object] = field(default_factory=dict)

    def in_(self, lang: Lang) -> str:
        """The message in `lang`."""
        return say(self.catalog, self.key, lang, **{k: _said(v, lang) for k, v in self.values.items()})

    def __str__(self) -> str:
        return self.in_("en")


def text(catalog: Catalog, key: str, /, **values: object) -> Text:
    """The `key` message of `catalog` with `values`, to be said later (see `Text`)."""
    if key not in catalog:
        raise KeyError(f"no message {key!r} in the catalog")
    return Text(catalog, key, values)


def said(message: str | Text, lang: Lang) -> str:
    """A message in `lang`: a `Text` in that language, a plain string as it is."""
    return message.in_(lang) if isinstance(message, Text) else message


def _said(value: object, lang: Lang) -> object:
    if isinstance(value, Text):
        return value.in_(lang)
    if isinstance(value, tuple):
        return ("；" if lang == "zh" else "; ").join(str(_said(v, lang)) for v in value)
    return value
