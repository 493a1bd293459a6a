"""`/help`: only what this user may run, one line and one example each; `/help CMD` for the detail."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from xihe.agent.gate import Who, is_admin, visible
from xihe.agent.i18n import Catalog, Lang, say_md
from xihe.agent.registry import ToolSpec
from xihe.agent.wecom_markdown import Md, block
from xihe.config.access import AccessConfig

Needs = Literal["anyone", "tool", "approver", "admin"]


@dataclass(frozen=True)
class HelpEntry:
    """One chat command as /help shows it."""

    command: str  # "/run WORKFLOW [DATES]"
    summary: str  # one line, English
    example: str = ""  # "/run order_sync 昨天"
    summary_zh: str = ""
    detail: str = ""  # shown by /help CMD, after the summary
    detail_zh: str = ""
    needs: Needs = "anyone"
    tool: str = ""  # needs == "tool": shown when the gate would let this user use the tool somewhere
    more: Callable[[Who, Lang], str] | None = None  # /help CMD: detail that depends on who asks

    @property
    def name(self) -> str:
        """`run` for "/run WORKFLOW [DATES]"."""
        return self.command.split()[0].lstrip("/").split("·")[0].strip()

    def text(self, lang: Lang) -> str:
        return self.summary_zh if lang == "zh" and self.summary_zh else self.summary


def entry(item: HelpEntry | tuple[str, str]) -> HelpEntry:
    """A help line given as (command, summary) becomes an entry anyone sees."""
    return item if isinstance(item, HelpEntry) else HelpEntry(item[0], item[1])


def may_use(e: HelpEntry, who: Who, access: AccessConfig, tools: Mapping[str, ToolSpec]) -> bool:
    """Whether `who` may run the command at all (the gate still decides each call)."""
    if e.needs == "admin":
        return is_admin(who, access)
    if e.needs == "approver":
        return any(r in access.roles and access.roles[r].approver for r in who.roles)
    if e.needs == "tool":
        spec = tools.get(e.tool)
        return spec is not None and visible(spec.name, spec.risk, _envs(spec), who, access)
    return True


def _envs(spec: ToolSpec) -> tuple[str, ...]:
    return spec.environments or (("*",) if spec.environment_of else ())


TEXT: Catalog = {
    "head": {
        "en": "You are `{user}` ({roles}). What you may do here:",
        "zh": "你是 `{user}`（{roles}）。你可以：",
    },
    "example": {"en": "e.g. `{example}`", "zh": "例：`{example}`"},
    "tools": {
        "en": "Or just ask; I may use: {tools}.",
        "zh": "也可以直接用中文问我；我能用的工具：{tools}。",
    },
    "no_tools": {"en": "You may not use any tools.", "zh": "你没有可用的工具。"},
    "more": {"en": "`/help CMD` explains one command.", "zh": "`/help 命令` 查看某个命令的详细说明。"},
    "unknown": {
        "en": "There is no command /{name} you may use. Try /help.",
        "zh": "没有你能用的 /{name} 命令。发 /help 看看能用什么。",
    },
    "tool_detail": {"en": "Runs the tool `{tool}`: {description}", "zh": "调用工具 `{tool}`：{description}"},
}


def render(
    entries: Sequence[HelpEntry],
    who: Who,
    access: AccessConfig,
    tools: Mapping[str, ToolSpec],
    lang: Lang,
    topic: str = "",
) -> str:
    """The whole /help (short), or `/help topic` (one command in detail), as WeCom markdown: the entries'
    own texts are xihe's markup; a typed topic, a user id, a tool's description are outside text."""
    allowed = [e for e in entries if may_use(e, who, access, tools)]
    if topic:
        return _detail(allowed, topic.lstrip("/").lower(), tools, lang, who)
    roles = ", ".join(who.roles) or ("无角色" if lang == "zh" else "no roles")
    lines: list[str] = [say_md(TEXT, "head", lang, user=who.user, roles=roles)]
    for e in allowed:
        example = f" · {say_md(TEXT, 'example', lang, example=e.example)}" if e.example else ""
        lines.append(f"- `{e.command}` {e.text(lang)}{example}")
    usable = sorted(s.name for s in tools.values() if visible(s.name, s.risk, _envs(s), who, access))
    lines.append(
        say_md(TEXT, "tools", lang, tools=", ".join(usable)) if usable else say_md(TEXT, "no_tools", lang)
    )
    lines.append(say_md(TEXT, "more", lang))
    return Md("\n".join(lines))


def _detail(
    allowed: Iterable[HelpEntry], name: str, tools: Mapping[str, ToolSpec], lang: Lang, who: Who
) -> str:
    matches = [e for e in allowed if e.name == name or name in e.command.lstrip("/").split(" · /")]
    if not matches:
        return say_md(TEXT, "unknown", lang, name=name)
    out = []
    for e in matches:
        out.append(f"`{e.command}` — {e.text(lang)}")
        detail = e.detail_zh if lang == "zh" and e.detail_zh else e.detail
        if detail:
            out.append(detail)
        if e.example:
            out.append(say_md(TEXT, "example", lang, example=e.example))
        if e.more is not None:
            out.append(e.more(who, lang))
            continue  # it says what the tool offers this user; the tool's whole description would not
        spec = tools.get(e.tool) if e.tool else None
        if spec is not None:
            description = Md(
                block(spec.description.strip())
            )  # a tool another server describes is outside text
            out.append(say_md(TEXT, "tool_detail", lang, tool=spec.name, description=description))
    return Md("\n".join(out))
