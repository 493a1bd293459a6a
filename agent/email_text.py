"""E-mail, the alert fallback's destination: a subject line, a plain-text part and an HTML part.

An alert row is stored as the WeCom markdown its channel renders (`wecom_markdown`), where every piece
of outside text is already inert (full-width twins of `<`, `[`, `*`…) and the only live markup is
xihe's own: `<font color>`, `<@userid>`, `[label](url)` with a checked http(s) address, `**bold**`,
`#` headings and `> ` quote lines. The mail says the same thing in each part:
- `subject`: one line; control characters, line breaks (a header-injection attempt) and bidi
  overrides become spaces or go, cut to 200 characters;
- `plain`: our markup read out (`P0`, `@zhangsan`, `label <url>`), nothing else changed;
- `html`: every character HTML-escaped (`&`, `<`, `>`, quotes), then only our markup made
  tags again: a link is an `<a href>` only for an http(s) address, a colour a `<span>`; the mail
  client cannot meet a tag, script or attribute from outside text.
"""

from __future__ import annotations

import re
from html import escape

from xihe.agent.wecom_markdown import drop_invisible

SUBJECT_CHARS = 200
_OURS = re.compile(
    r'<font color="(?P<color>info|comment|warning)">(?P<colored>[^<\n]*)</font>'
    r"|<@(?P<user>[A-Za-z0-9_.@-]{1,64})>"
    r"|\[(?P<label>[^\[\]\n]*)\]\((?P<url>https?://[^\s()<>\[\]`\"'\\]+)\)"
    r"|\*\*(?P<bold>[^*\n]+)\*\*"
)
_HEADING = re.compile(r"^#{1,6} +")
_COLORS = {"info": "#2e7d32", "comment": "#757575", "warning": "#e65100"}  # WeCom's green, grey, orange-red


def subject(value: object) -> str:
    """A Subject header value: one line, no control or bidi character, at most 200 characters."""
    line = " ".join(drop_invisible(re.sub(r"[\r\n\t\f\v]", " ", str(value))).split())
    return line if len(line) <= SUBJECT_CHARS else line[: SUBJECT_CHARS - 1] + "…"


def _plain_mark(m: re.Match[str]) -> str:
    if m["color"]:
        return m["colored"]
    if m["user"]:
        return "@" + m["user"]
    if m["url"]:
        return f"{m['label']} <{m['url']}>"
    return m["bold"]


def plain(markdown: str) -> str:
    """The text/plain part: the message with xihe's markup read out as words."""
    lines = drop_invisible(markdown).split("\n")
    return "\n".join(_OURS.sub(_plain_mark, _HEADING.sub("", line)) for line in lines)


def _html_line(line: str) -> str:
    out: list[str] = []
    pos = 0
    for m in _OURS.finditer(line):
        out.append(escape(line[pos : m.start()]))
        if m["color"]:
            out.append(f'<span style="color:{_COLORS[m["color"]]}">{escape(m["colored"])}</span>')
        elif m["user"]:
            out.append("@" + escape(m["user"]))
        elif m["url"]:
            out.append(f'<a href="{escape(m["url"])}">{escape(m["label"])}</a>')
        else:
            out.append(f"<b>{escape(m['bold'])}</b>")
        pos = m.end()
    out.append(escape(line[pos:]))
    return "".join(out)


def html(markdown: str) -> str:
    """The text/html part: escaped text, xihe's own links, colours, headings and quotes as tags."""
    rows = []
    for line in drop_invisible(markdown).split("\n"):
        if _HEADING.match(line):
            rows.append(
                f'<p style="font-size:1.15em;font-weight:bold">{_html_line(_HEADING.sub("", line))}</p>'
            )
        elif line.startswith(">"):
            quoted = _html_line(line[1:].removeprefix(" "))
            rows.append(f'<div style="border-left:3px solid #ccc;padding-left:8px;color:#444">{quoted}</div>')
        elif line.strip():
            rows.append(f"<div>{_html_line(line)}</div>")
        else:
            rows.append("<br>")
    body = "\n".join(rows)
    return f'<!DOCTYPE html>\n<html><body style="font-family:sans-serif;line-height:1.5">\n{body}\n</body></html>\n'
