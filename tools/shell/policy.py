"""What a shell entry adds to a gate decision: its environment, risk and scope, per call.

The gate (`xihe.agent.gate.decide`) is the only place that allows, asks for confirmation or denies. The
tool in the product and `xihe shell check` both feed it these same per-call inputs:

- environment: an argument value naming one of the entry's `environments`, else its first one;
- risk: `write` for a `risk: write` entry or for any call on an environment access.yaml marks
  `production: true`; `read` otherwise;
- scope: the entry's `roles` (the user needs one of them on top of the tool grant) and `environments`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from xihe.agent.gate import Confirm, Decision, Deny, Scope, Who, decide
from xihe.agent.i18n import Lang, say_md
from xihe.agent.subject import Subject
from xihe.agent.wecom_markdown import Md
from xihe.config.access import AccessConfig
from xihe.config.shell.entry import Entry
from xihe.tools.shell.messages import SH
from xihe.tools.shell.template import template_text
from xihe.tools.shell.whitelist import Match

TOOL = "run_shell_command"


def entry_environment(entry: Entry, values: Mapping[str, object]) -> str:
    """Where a call acts: an argument naming one of the entry's environments, else its first one."""
    if not entry.environments:
        return ""
    named = [str(v) for v in values.values() if str(v) in entry.environments]
    return named[0] if named else entry.environments[0]


def entry_risk(entry: Entry, environment: str, access: AccessConfig) -> str:
    """`write` for a write entry or a production environment (from access.yaml), else `read`."""
    env = access.environments.get(environment) if environment else None
    return "write" if entry.risk == "write" or (env is not None and env.production) else "read"


def entry_scope(entry: Entry) -> Scope:
    """The entry's own roles and environments, checked by the gate on top of the tool grant."""
    return Scope(entry.name, tuple(entry.roles), tuple(entry.environments))


def entry_subject(entry: Entry, access: AccessConfig) -> Subject:
    """The entry as policy explain and `/help sh` see it: its scope, and its risk on each environment."""
    places = tuple((env, entry_risk(entry, env, access)) for env in (entry.environments or [""]))
    return Subject(f"{TOOL}:{entry.name}", TOOL, places, entry_scope(entry))


@dataclass(frozen=True)
class Runnable:
    """An entry a user may run: where (empty: it acts on no environment) and whether /confirm is needed."""

    entry: Entry
    environments: tuple[str, ...]
    confirm: bool


def runnable(entries: Iterable[Entry], who: Who, access: AccessConfig) -> list[Runnable]:
    """The entries the gate would not deny `who` somewhere (what `/help sh` lists for them)."""
    out = []
    for entry in entries:
        subject = entry_subject(entry, access)
        decided = [(env, decide(TOOL, risk, env, who, access, subject.scope)) for env, risk in subject.places]
        open_ = [(env, d) for env, d in decided if not isinstance(d, Deny)]
        if open_:
            envs = tuple(env for env, _ in open_ if env)
            out.append(Runnable(entry, envs, all(isinstance(d, Confirm) for _, d in open_)))
    return out


def help_text(found: Sequence[Runnable], lang: Lang) -> str:
    """`/help sh`: the entries this user may run, as lines to type, and the next step in chat (WeCom
    markdown: a template and a description come from shell.yaml and are encoded as outside text)."""
    if not found:
        return say_md(SH, "help_nothing", lang)
    lines: list[str] = [say_md(SH, "help_head", lang)]
    for r in found:
        note = say_md(SH, "help_on", lang, environments=", ".join(r.environments)) if r.environments else ""
        note += say_md(SH, "help_confirm", lang) if r.confirm else ""
        lines.append(
            say_md(
                SH,
                "help_entry",
                lang,
                template=template_text(r.entry),
                description=r.entry.description,
                note=Md(note),
            )
        )
    return Md("\n".join([*lines, say_md(SH, "help_next", lang)]))


def gate_decision(match: Match, who: Who, access: AccessConfig, environment: str | None = None) -> Decision:
    """The gate's decision for a matched command (`environment` overrides the one derived from it)."""
    entry = match.entry
    env = entry_environment(entry, match.values) if environment is None else environment
    return decide(TOOL, entry_risk(entry, env, access), env, who, access, entry_scope(entry))
