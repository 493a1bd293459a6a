"""Render notifications as WeCom robot `markdown` (v1) with Jinja2, escaped and fitted to the byte limit.

Every `{{ value }}` goes through `finalize`, which encodes it for one line of WeCom markdown
(`xihe.agent.wecom_markdown.inline`: no link, mention, colour, heading or emphasis can come from a
value), so an admin's override template cannot forget to escape. Markup we produce ourselves
(`<@userid>`, `<font>`, the quoted log block, links) is `Md`, which `finalize` passes through
untouched; a link needs a `Url` (composed from configured parts and checked), anything else is shown
as inert text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from jinja2 import ChoiceLoader, Environment, FileSystemLoader, StrictUndefined, Template

from xihe.agent import wecom_markdown as md
from xihe.agent.alerts.tplcache import template_cache
from xihe.agent.timefmt import show

TEMPLATES = Path(__file__).parent / "templates"
MARKUPS = {"wecom_markdown": TEMPLATES}  # markup a notifier declares → its template set
TEMPLATE_NAMES = (
    "instance.md.j2",
    "aggregate.md.j2",
    "summary.md.j2",
    "node.md.j2",
    "maint.md.j2",
    "maint_on.md.j2",
    "maint_end.md.j2",
    "more.md.j2",
    "ack.md.j2",
    "resolved.md.j2",
    "page.md.j2",
)
# The Environment's options that shape the compiled code (part of the compiled-template cache's key).
OPTIONS: dict[str, Any] = {
    "autoescape": False,
    "trim_blocks": True,
    "lstrip_blocks": True,
    "keep_trailing_newline": False,
}


def _finalize(value: Any) -> str:
    return "" if value is None else md.inline(value)


def _font(tier: Any) -> md.Md:
    return md.font({"P0": "warning", "P1": "comment", "P2": "info"}.get(str(tier), "comment"), tier)


def _duration(seconds: Any) -> str:
    if seconds is None:
        return "-"
    s = int(seconds)
    return f"{s // 3600}h{s % 3600 // 60:02d}m{s % 60:02d}s" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def _cut(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: max(0, chars - 1)] + "…"


def tail(text: str, chars: int) -> str:
    """The last `chars` characters of a log, starting at a line boundary when one is close."""
    if len(text) <= chars:
        return text
    cut = text[-chars:]
    nl = cut.find("\n")
    return "…" + (cut[nl + 1 :] if 0 <= nl < 80 else cut)


def fit_bytes(text: str, limit: int) -> str:
    """Cut `text` to at most `limit` UTF-8 bytes at a character boundary, never inside `<@…>`/`<font…>`."""
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    marker = "\n…"
    out = raw[: limit - len(marker.encode())].decode("utf-8", errors="ignore")
    opened = out.rfind("<")
    if opened > out.rfind(">"):
        out = out[:opened]  # our own tags are the only raw '<' left after escaping
    return out + marker


@dataclass(frozen=True)
class Budget:
    """How much of each variable field a rendering may use; tightened until the message fits."""

    log_chars: int
    error_chars: int
    list_items: int
    name_chars: int


class Renderer:
    """Jinja2 renderer: package templates, optionally overridden from an admin directory."""

    def __init__(
        self,
        templates_dir: str | Path | None = None,
        timezone: str = "Asia/Shanghai",
        max_bytes: int = 4096,
        log_tail_chars: int = 500,
        markup: str = "wecom_markdown",
    ) -> None:
        if markup not in MARKUPS:
            raise ValueError(f"no templates for markup {markup!r} (known: {', '.join(sorted(MARKUPS))})")
        loaders = [FileSystemLoader(str(templates_dir))] if templates_dir else []
        self.markup = markup
        self.env = Environment(
            loader=ChoiceLoader([*loaders, FileSystemLoader(str(MARKUPS[markup]))]),
            undefined=StrictUndefined,
            finalize=_finalize,
            bytecode_cache=template_cache(OPTIONS),  # compiled once per machine (tplcache.py)
            **OPTIONS,
        )
        self.tz = ZoneInfo(timezone)
        self.max_bytes = max_bytes
        self.log_tail_chars = log_tail_chars
        self.env.filters.update(
            quote=md.quote,
            at=md.mention,
            link=lambda url, label="日志": md.link(label, url),
            font=_font,
            duration=_duration,
            t=self._time,
            esc=lambda v: md.Md(md.inline(v)),
        )
        # Compile now (once per config load), so a bad override template fails at load, not mid-storm;
        # held here, so a message does not ask Jinja's cache (and stat the file) for its template
        self._templates = {name: self.env.get_template(name) for name in TEMPLATE_NAMES}
        self._budgets = tuple(self.budgets())

    def _time(self, value: datetime | None) -> str:
        return show(value, self.tz)

    def template(self, name: str) -> Template:
        """The compiled template `name` (one of TEMPLATE_NAMES as loaded with the renderer)."""
        tpl = self._templates.get(name)
        return tpl if tpl is not None else self.env.get_template(name)

    def budgets(self) -> list[Budget]:
        """From generous to tight: the log keeps its tail until the other fields are cut."""
        n = self.log_tail_chars
        return [
            Budget(n, 600, 20, 120),
            Budget(n, 300, 10, 80),
            Budget(n, 120, 5, 48),
            Budget(n, 80, 3, 32),
            Budget(n // 2, 80, 3, 32),
            Budget(n // 5, 60, 2, 24),
            Budget(0, 40, 1, 16),
        ]

    def fits(self, template: str, context: Mapping[str, Any]) -> bool:
        """Whether `template` renders whole within `max_bytes` at some budget."""
        tpl = self.template(template)
        return any(
            len(tpl.render(**_apply(context, b)).strip().encode("utf-8")) <= self.max_bytes
            for b in self._budgets
        )

    def render(self, template: str, context: Mapping[str, Any]) -> str:
        """Render `template` (e.g. 'instance.md.j2') to at most `max_bytes` UTF-8 bytes."""
        tpl = self.template(template)
        text = ""
        for budget in self._budgets:
            text = tpl.render(**_apply(context, budget)).strip()
            if len(text.encode("utf-8")) <= self.max_bytes:
                return text
        return fit_bytes(text, self.max_bytes)


def _apply(context: Mapping[str, Any], b: Budget) -> dict[str, Any]:
    """Shorten the variable fields of a context to budget `b` (keys ending in _log/_error/_list/_name)."""
    out: dict[str, Any] = {}
    for key, value in context.items():
        if key.endswith("_log") and isinstance(value, str):
            out[key] = tail(value, b.log_chars) if b.log_chars else ""
        elif key.endswith("_error") and isinstance(value, str):
            out[key] = _cut(" ".join(value.split()), b.error_chars)
        elif key.endswith("_name") and isinstance(value, str):
            out[key] = _cut(value, b.name_chars)
        elif key.endswith("_list") and isinstance(value, Sequence) and not isinstance(value, str):
            items = list(value)
            out[key] = [_shorten_item(i, b) for i in items[: b.list_items]]
            out[key.removesuffix("_list") + "_more"] = max(0, len(items) - b.list_items) + int(
                context.get(key.removesuffix("_list") + "_more", 0) or 0
            )
        elif key.endswith("_more") and key.removesuffix("_more") + "_list" in context:
            continue
        else:
            out[key] = value
    return out


def _shorten_item(item: Any, b: Budget) -> Any:
    if isinstance(item, str):
        return _cut(item, b.name_chars)
    if isinstance(item, Mapping):
        return {k: _cut(v, b.name_chars) if isinstance(v, str) else v for k, v in item.items()}
    return item


def duration_seconds(start: datetime | None, end: datetime | None) -> float | None:
    """end - start in seconds, or None when either is unknown."""
    if start is None or end is None:
        return None
    return (end - start) / timedelta(seconds=1)
