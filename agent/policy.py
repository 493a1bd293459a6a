"""Policy explain: what may this user do, where, with whose approval; who may use this tool there.

Nothing here decides. Every answer is `gate.decide` over the loaded config (and `gate.may_approve`
for who can release a production write), so the explanation and the gate cannot disagree:

    for_user("erin", subjects, access)         one row per tool (or shell entry) and environment
    for_tool(subject, access, environment)     one row per configured user, then unlisted users

`xihe policy explain` prints these; the `/policy` chat command (admins) says them in the
conversation's language.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from xihe.agent.commands import Command
from xihe.agent.gate import (
    Allow,
    Confirm,
    Decision,
    Deny,
    Who,
    decide,
    identify,
    is_admin,
    may_approve,
)
from xihe.agent.i18n import Catalog, Lang, say_md
from xihe.agent.inbound import CommandSession, Inbound, reply_lang
from xihe.agent.registry import ToolSpec
from xihe.agent.subject import Subject
from xihe.agent.wecom_markdown import Md, inline
from xihe.config.access import AccessConfig

UNLISTED = "anyone else"  # the row for users access.yaml does not list (they get unknown_user_roles)
SUGGEST = 70.0  # how close a name must be to be offered as "did you mean"


@dataclass(frozen=True)
class Row:
    """The gate's decision for one user, subject and environment, and who would have to approve."""

    who: Who
    subject: Subject
    environment: str
    decision: Decision
    approvers: tuple[str, ...] = ()  # users who may /approve it (a production write), else ()

    @property
    def verdict(self) -> str:
        """allow | confirm | approve (confirm and an approver) | deny."""
        if isinstance(self.decision, Confirm):
            return "approve" if self.decision.needs_approval else "confirm"
        return "allow" if isinstance(self.decision, Allow) else "deny"

    def data(self) -> dict[str, object]:
        """The row as plain data (`--json`)."""
        return {
            "user": self.who.user,
            "roles": list(self.who.roles),
            "known": self.who.known,
            "subject": self.subject.label,
            "tool": self.subject.tool,
            "environment": self.environment,
            "decision": self.verdict,
            "approvers": list(self.approvers),
            "reason": self.decision.reason,
        }


def tool_subject(spec: ToolSpec, access: AccessConfig) -> Subject:
    """A tool as the gate sees it without arguments: its static risk, on every environment it may act on."""
    if spec.environments and spec.environments != ("*",):
        envs: tuple[str, ...] = spec.environments
    elif spec.environments or spec.environment_of is not None:
        envs = tuple(access.environments)  # per call (e.g. a workflow's environment): any of them
    else:
        envs = ("",)
    return Subject(spec.name, spec.name, tuple((e, spec.risk) for e in envs))


def subjects(
    specs: Iterable[ToolSpec], access: AccessConfig, expand: Mapping[str, Sequence[Subject]] | None = None
) -> list[Subject]:
    """Every enabled tool, a tool in `expand` replaced by its own subjects (the shell's entries)."""
    out: list[Subject] = []
    for spec in sorted(specs, key=lambda s: s.name):
        out.extend((expand or {}).get(spec.name) or [tool_subject(spec, access)])
    return out


def _approvers(user: str, access: AccessConfig) -> tuple[str, ...]:
    return tuple(sorted(u for u in access.users if isinstance(may_approve(u, user, access), Allow)))


def _row(who: Who, subject: Subject, environment: str, risk: str, access: AccessConfig) -> Row:
    decision = decide(subject.tool, risk, environment, who, access, subject.scope)
    needs = isinstance(decision, Confirm) and decision.needs_approval
    return Row(who, subject, environment, decision, _approvers(who.user, access) if needs else ())


def for_user(
    user: str, found: Iterable[Subject], access: AccessConfig, environment: str | None = None
) -> list[Row]:
    """What `user` may do: one row per subject and environment (only `environment` when given)."""
    who = identify(user, access)
    return [
        _row(who, s, env, risk, access)
        for s in found
        for env, risk in s.places
        if environment is None or env in (environment, "")
    ]


def for_tool(subject: Subject, access: AccessConfig, environment: str | None = None) -> list[Row]:
    """Who may use `subject`: one row per configured user (then unlisted users) and environment."""
    people = [identify(u, access) for u in sorted(access.users)]
    people.append(Who(UNLISTED, tuple(access.unknown_user_roles), False))
    return [
        _row(who, subject, env, risk, access)
        for who in people
        for env, risk in subject.places
        if environment is None or env in (environment, "")
    ]


TEXT: Catalog = {
    "user_head": {
        "en": "What {who} may do ({roles}), as the gate decides:",
        "zh": "{who}（{roles}）能做什么（按门禁的判定）：",
    },
    "tool_head": {
        "en": "Who may use {tool}{where}, as the gate decides:",
        "zh": "谁能使用 {tool}{where}（按门禁的判定）：",
    },
    "on": {"en": " on {env}", "zh": "（{env}）"},
    "no_roles": {"en": "no roles", "zh": "没有角色"},
    "person": {"en": "{user} ({roles})", "zh": "{user}（{roles}）"},
    "unlisted": {"en": "users not in access.yaml", "zh": "access.yaml 里没有的用户"},
    "not_listed": {"en": "{user} (not in access.yaml)", "zh": "{user}（access.yaml 里没有）"},
    "allow": {"en": "✅ {what}: allowed", "zh": "✅ {what}：允许"},
    "confirm": {"en": "🟡 {what}: after the requester's /confirm", "zh": "🟡 {what}：发起人 /confirm 之后"},
    "approve": {
        "en": "🟠 {what}: after the requester's /confirm and an /approve by {approvers}",
        "zh": "🟠 {what}：发起人 /confirm，并由 {approvers} /approve 之后",
    },
    "nobody": {"en": "nobody (no approver configured)", "zh": "没有人（没有配置审批人）"},
    "or": {"en": " or ", "zh": " 或 "},
    "deny": {"en": "⛔ {what}: {reason}", "zh": "⛔ {what}：{reason}"},
    "denied_tools": {
        "en": "⛔ no role grants: {tools}",
        "zh": "⛔ 没有角色允许：{tools}",
    },
    "none": {"en": "(nothing matches)", "zh": "（没有匹配的）"},
    # /policy
    "usage": {
        "en": "Usage: `/policy USER` (what they may do) or `/policy TOOL [ENV]` (who may use it), e.g. `/policy alice`.",
        "zh": "用法：`/policy 用户`（他能做什么）或 `/policy 工具 [环境]`（谁能用），例如 `/policy alice`。",
    },
    "admins_only": {"en": "/policy is for admins.", "zh": "/policy 只有管理员可以用。"},
    "unknown_env": {
        "en": "There is no environment {env} (access.yaml has {known}).",
        "zh": "没有环境 {env}（access.yaml 里有：{known}）。",
    },
    "unknown": {
        "en": "{name} is neither a tool nor a user in access.yaml.{hint}",
        "zh": "{name} 既不是工具，也不是 access.yaml 里的用户。{hint}",
    },
    "unknown_tool": {"en": "There is no tool {name} here.{hint}", "zh": "这里没有工具 {name}。{hint}"},
    "did_you_mean": {"en": " Did you mean {names}?", "zh": "你是不是想找 {names}？"},
}


def _code(name: str) -> Md:
    """A tool, entry or user name as a code span (its characters encoded: a YAML value is outside text)."""
    return Md(f"`{inline(name)}`")


def _what(row: Row, by_user: bool, lang: Lang) -> Md:
    if by_user:
        name = _code(row.subject.label)
    elif row.who.user == UNLISTED:
        name = say_md(TEXT, "unlisted", lang)
    else:
        roles = ", ".join(row.who.roles) or say_md(TEXT, "no_roles", lang)
        name = say_md(TEXT, "person", lang, user=row.who.user, roles=roles)
    return Md(name + (say_md(TEXT, "on", lang, env=row.environment) if row.environment and by_user else ""))


def render(rows: Sequence[Row], lang: Lang, *, by_user: bool) -> Md:
    """The rows as lines for people (WeCom markdown: names and reasons from YAML are outside text); a
    user's tools that no role grants are listed on one line."""
    lines: list[str] = []
    ungranted: list[str] = []
    for row in rows:
        if by_user and isinstance(row.decision, Deny) and row.decision.code == "no_grant":
            if row.subject.label not in ungranted:
                ungranted.append(row.subject.label)
            continue
        what = _what(row, by_user, lang)
        if row.verdict == "approve":
            names = say_md(TEXT, "or", lang).join(map(inline, row.approvers)) or say_md(TEXT, "nobody", lang)
            lines.append(say_md(TEXT, "approve", lang, what=what, approvers=Md(names)))
        elif row.verdict == "deny":
            lines.append(say_md(TEXT, "deny", lang, what=what, reason=row.decision.text(lang)))
        else:
            lines.append(say_md(TEXT, row.verdict, lang, what=what))
    if ungranted:
        lines.append(say_md(TEXT, "denied_tools", lang, tools=", ".join(ungranted)))
    return Md("\n".join(lines)) or say_md(TEXT, "none", lang)


def explain_user(
    user: str, found: Iterable[Subject], access: AccessConfig, lang: Lang, environment: str | None = None
) -> Md:
    """The heading and rows of `for_user`."""
    who = identify(user, access)
    name = Md(inline(user)) if who.known else say_md(TEXT, "not_listed", lang, user=user)
    roles = ", ".join(who.roles) or say_md(TEXT, "no_roles", lang)
    head = say_md(TEXT, "user_head", lang, who=name, roles=roles)
    return Md(head + "\n" + render(for_user(user, found, access, environment), lang, by_user=True))


def explain_tool(subject: Subject, access: AccessConfig, lang: Lang, environment: str | None = None) -> Md:
    """The heading and rows of `for_tool`."""
    where = say_md(TEXT, "on", lang, env=environment) if environment else ""
    head = say_md(TEXT, "tool_head", lang, tool=_code(subject.label), where=Md(where))
    rows = for_tool(subject, access, environment)
    body = "\n".join(
        render([r for r in rows if r.environment == env], lang, by_user=False)
        if environment or len({r.environment for r in rows}) == 1
        else f"{inline(env or '-')}:\n"
        + render([r for r in rows if r.environment == env], lang, by_user=False)
        for env in dict.fromkeys(r.environment for r in rows)
    )
    return Md(head + "\n" + body)


@dataclass(frozen=True)
class Query:
    """What `/policy X [ENV]` or `xihe policy explain` asks about, once read; `problem` when it cannot be."""

    user: str | None = None
    subjects: tuple[Subject, ...] = ()
    environment: str | None = None
    problem: str = ""


def read_query(
    name: str,
    environment: str | None,
    found: Sequence[Subject],
    access: AccessConfig,
    lang: Lang,
    kind: Literal["any", "user", "tool"] = "any",
) -> Query:
    """A tool (or shell entry) by name, else a user id listed in access.yaml; `kind` = "user" takes
    any user id (an unlisted one has the unknown users' roles). An unknown name or environment says so."""
    if environment is not None and environment not in access.environments:
        known = ", ".join(access.environments)
        return Query(problem=say_md(TEXT, "unknown_env", lang, env=environment, known=known))
    matching = tuple(s for s in found if name in (s.tool, s.label))
    if matching and kind != "user":
        return Query(subjects=matching, environment=environment)
    user = name.lstrip("@")
    if kind == "user" or (kind == "any" and user in access.users):
        return Query(user=user, environment=environment)
    names = {s.label for s in found} | (set(access.users) if kind == "any" else set())
    from rapidfuzz import fuzz, process  # only a name that matches nothing needs it

    close = process.extract(name, names, scorer=fuzz.WRatio, limit=3)
    shown = Md(", ".join(_code(c) for c, score, _ in close if score >= SUGGEST))
    hint = say_md(TEXT, "did_you_mean", lang, names=shown) if shown else Md("")
    return Query(
        problem=say_md(TEXT, "unknown" if kind == "any" else "unknown_tool", lang, name=name, hint=hint)
    )


def explain(query: Query, found: Sequence[Subject], access: AccessConfig, lang: Lang) -> Md:
    """The answer to a query that could be read."""
    if query.user is not None:
        return explain_user(query.user, found, access, lang, query.environment)
    return Md("\n\n".join(explain_tool(s, access, lang, query.environment) for s in query.subjects))


def command(session: CommandSession, who: Who, msg: Inbound, cmd: Command) -> str:
    """`/policy USER` or `/policy TOOL [ENV]`: admins ask what the gate would decide."""
    lang = reply_lang(session, msg)
    deps = session.deps
    access = deps.settings.access
    if not is_admin(who, access):
        return say_md(TEXT, "admins_only", lang)
    if not cmd.args:
        return say_md(TEXT, "usage", lang)
    expand: dict[str, list[Subject]] = {}
    for s in deps.shell.subjects(access) if deps.shell is not None else []:
        expand.setdefault(s.tool, []).append(s)
    found = subjects(session.agent.registry.specs.values(), access, expand)
    query = read_query(cmd.args[0], cmd.args[1] if len(cmd.args) > 1 else None, found, access, lang)
    return query.problem or explain(query, found, access, lang)
