"""Turn a request into a validated argv: the model's (entry, args) form, or a `/sh` line matched to one template.

Templates are compiled and filled in tools/shell/template.py and a line's tokens are matched against
them in tools/shell/matching.py. Nothing here runs a program or a shell. Every refusal is a `ShellRefused` naming the entry that
came closest and the argument (or token) that failed.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rapidfuzz import fuzz

from xihe.agent.errors import ToolRetry
from xihe.agent.i18n import Text, text
from xihe.config.shell.entry import Entry
from xihe.config.shell.file import ShellConfig
from xihe.tools.shell import messages
from xihe.tools.shell.matching import Fail, walk
from xihe.tools.shell.problems import problem
from xihe.tools.shell.template import compile_template, render_values, template_text
from xihe.tools.shell.values import ENV_ASSIGNMENT, BadValue, check_invisible, check_value


class ShellRefused(ToolRetry):
    """A request that does not match the whitelist; `reason` (English) names the entry and argument.

    The error's `text` says the same for people in their language; a refusal of a `/sh` line also
    has its headline's `code` and `values` (tools/shell/messages.py REASONS).
    """

    def __init__(
        self,
        reason: str | Text,
        *,
        entry: str | None = None,
        argument: str | None = None,
        code: str = "",
        values: Mapping[str, object] | None = None,
    ) -> None:
        super().__init__(reason)
        self.reason, self.entry, self.argument = str(reason), entry, argument
        self.code, self.values = code, dict(values or {})

    @classmethod
    def coded(
        cls, code: str, *, entry: str | None = None, argument: str | None = None, **values: object
    ) -> ShellRefused:
        """A refusal whose reason is the `code` message filled with `values`."""
        return cls(
            text(messages.REASONS, code, **values), entry=entry, argument=argument, code=code, values=values
        )

    @property
    def problem(self) -> str | Text:
        """The reason, from its catalog when it has one (to quote inside another message)."""
        return self.text if self.text is not None else self.reason


@dataclass(frozen=True)
class Match:
    """A request that matched one entry: the argv that will run and the values that built it."""

    entry: Entry
    argv: tuple[str, ...]
    values: Mapping[str, str] = field(default_factory=dict)
    flags: tuple[str, ...] = ()


class Whitelist:
    """The configured entries, compiled; builds validated argv lists and never runs anything."""

    def __init__(self, config: ShellConfig) -> None:
        self.config = config
        self.entries: dict[str, Entry] = {e.name: e for e in config.entries}
        self._templates = {e.name: compile_template(e) for e in config.entries}

    def get(self, name: str) -> Entry:
        """The entry called `name`, or ShellRefused naming the closest one."""
        if name in self.entries:
            return self.entries[name]
        close = self._closest_name(name)
        hint = problem("did_you_mean", name=repr(close)) if close else ""
        available = ", ".join(self.entries)
        raise ShellRefused(
            problem("not_command", name=repr(name[:60]), hint=hint, available=available),
            entry=close,
            argument="command",
        )

    def _closest_name(self, name: str) -> str | None:
        scored = [(fuzz.ratio(name, n), n) for n in self.entries]
        best = max(scored, default=(0.0, ""))
        return best[1] if best[0] >= 50 else None

    def root_for(self, entry: Entry, arg: str) -> Path | None:
        """The workspace a path argument must stay inside."""
        spec = entry.args[arg]
        name = spec.root or entry.workspace
        return Path(self.config.workspaces[name]) if name else None

    def shown_values(self, match: Match) -> dict[str, str]:
        """The match's values as people read them: a path relative to its workspace ("." for the root),
        never the server's absolute path (the tool takes it back in this form)."""
        out = dict(match.values)
        for name, value in match.values.items():
            root = self.root_for(match.entry, name) if match.entry.args[name].type == "path" else None
            if root is not None and Path(value).is_relative_to(root.resolve()):
                out[name] = str(Path(value).relative_to(root.resolve()))
        return out

    def _value(self, entry: Entry, arg: str, value: object) -> str:
        try:
            return check_value(value, entry.args[arg], self.root_for(entry, arg))
        except BadValue as exc:
            why = problem("bad_argument", entry=repr(entry.name), arg=repr(arg), problem=exc.text)
            raise ShellRefused(why, entry=entry.name, argument=arg) from None

    def from_args(self, command: str, args: Mapping[str, object], flags: Iterable[str] = ()) -> Match:
        """The model's form: entry name plus typed arguments -> validated argv."""
        if not isinstance(command, str):
            raise ShellRefused(problem("command_type"), argument="command")
        entry = self.get(command)
        if not isinstance(args, Mapping):
            raise ShellRefused(problem("args_type"), entry=entry.name, argument="args")
        for key in args:
            if key not in entry.args:
                m = ENV_ASSIGNMENT.match(f"{key}=")
                what = problem("an_env" if (m and key.isupper()) else "not_its_argument")
                takes = ", ".join(entry.args) or problem("nothing")
                why = problem(
                    "not_argument", entry=repr(entry.name), key=repr(str(key)[:40]), what=what, takes=takes
                )
                raise ShellRefused(why, entry=entry.name, argument=str(key))
        values = {k: self._value(entry, k, v) for k, v in args.items() if v is not None}
        for name, spec in entry.args.items():
            if spec.required and name not in values:
                why = problem(
                    "missing_argument", entry=repr(entry.name), name=repr(name), description=spec.description
                )
                raise ShellRefused(why, entry=entry.name, argument=name)
        flag_list = self._flags(entry, flags)
        return self._render(entry, values, flag_list)

    def _flags(self, entry: Entry, flags: Iterable[str]) -> tuple[str, ...]:
        out: list[str] = []
        for f in flags:
            if not isinstance(f, str) or f not in entry.flags:
                allowed = ", ".join(entry.flags) or problem("none")
                why = problem(
                    "flag_not_allowed", entry=repr(entry.name), flag=repr(str(f)[:40]), allowed=allowed
                )
                raise ShellRefused(why, entry=entry.name, argument="flags")
            if f in out:
                why = problem("flag_twice", entry=repr(entry.name), flag=repr(f))
                raise ShellRefused(why, entry=entry.name, argument="flags")
            out.append(f)
        return tuple(out)

    def check_match(self, match: Match) -> Match | None:
        """The entry's read-only `check:` command for the same values, or None when it has none."""
        entry = match.entry
        if entry.check is None:
            return None
        check = entry.model_copy(update={"argv": entry.check, "flags": [], "writes": False, "risk": "read"})
        return Match(entry=check, argv=render_values(check, match.values, ()), values=match.values)

    def _render(self, entry: Entry, values: Mapping[str, str], flags: tuple[str, ...]) -> Match:
        argv = render_values(entry, values, flags)
        total = sum(len(a) + 1 for a in argv)
        if total > self.config.max_argv_chars:
            limit = self.config.max_argv_chars
            why = problem("argv_too_long", entry=repr(entry.name), total=total, limit=limit)
            raise ShellRefused(why, entry=entry.name, argument="argv")
        return Match(entry=entry, argv=tuple(argv), values=dict(values), flags=flags)

    # ---- the chat form -------------------------------------------------------------------------

    def match_line(self, line: str) -> Match:
        """The `/sh <line>` form: split with shlex (no shell) and match exactly one template."""
        if len(line) > self.config.max_argv_chars:
            raise ShellRefused.coded(
                "line_too_long", argument="line", length=len(line), limit=self.config.max_argv_chars
            )
        for ch in ("\x00", "\n", "\r"):
            if ch in line:
                raise ShellRefused.coded("line_nul" if ch == "\x00" else "line_break", argument="line")
        operator = _unquoted_operator(line)
        if operator:
            raise ShellRefused.coded("operator", argument="line", operator=repr(operator))
        try:
            tokens = shlex.split(line, posix=True)
        except ValueError as exc:
            raise ShellRefused.coded("split", argument="line", error=str(exc)) from None
        return self.match_argv(tokens)

    def match_argv(self, tokens: Sequence[str]) -> Match:
        """An argv list (already split) that must match exactly one entry's template."""
        if not tokens:
            raise ShellRefused.coded("empty", argument="line")
        if ENV_ASSIGNMENT.match(tokens[0]):
            name = tokens[0].split("=", 1)[0]
            raise ShellRefused.coded("env_assignment", argument=name, name=name)
        for n, tok in enumerate(tokens):
            bad = _screen(tok)
            if bad is not None:
                raise ShellRefused(problem("token", n=n, problem=bad), argument=f"argv[{n}]")
        matches: list[Match] = []
        fails: dict[str, Fail] = {}
        for entry in self.entries.values():
            result = self._try(entry, tokens)
            if isinstance(result, Match):
                matches.append(result)
            else:
                fails[entry.name] = result
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            names = ", ".join(m.entry.name for m in matches)
            raise ShellRefused.coded("several", entry=matches[0].entry.name, names=names)
        if not fails:
            raise ShellRefused.coded("none_whitelisted", argument="line")
        line = " ".join(tokens)
        best = max(fails, key=lambda n: (fails[n].depth, fuzz.ratio(line, template_text(self.entries[n]))))
        f = fails[best]
        where = {"closest": repr(best), "template": template_text(self.entries[best]), "detail": f.reason}
        if tokens[0] not in {str(e.argv[0]) for e in self.entries.values()}:
            raise ShellRefused.coded(
                "not_program", entry=best, argument=f.argument, program=repr(tokens[0][:40]), **where
            )
        raise ShellRefused.coded("no_match", entry=best, argument=f.argument, **where)

    def _try(self, entry: Entry, tokens: Sequence[str]) -> Match | Fail:
        captured: dict[str, str] = {}
        flags: list[str] = []
        found = walk(entry, self._templates[entry.name], 0, list(tokens), 0, captured, flags)
        if isinstance(found, Fail):
            return found
        values, flag_list = found
        try:
            return self.from_args(entry.name, values, flag_list)
        except ShellRefused as exc:
            return Fail(len(tokens) + 1, exc.problem, exc.argument)


def _unquoted_operator(line: str) -> str | None:
    """The first shell operator outside quotes (`&&`, `|`, `;`, `>`...), if any."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        for tok in lexer:
            if tok and all(c in "();<>|&" for c in tok):
                return tok
    except ValueError:
        return None  # unbalanced quotes: reported by the real split
    return None


def _screen(token: str) -> Text | None:
    """Characters no token may hold anywhere (NUL, controls, bidi, invisible), or None."""
    try:
        check_invisible(token)
    except BadValue as exc:
        return exc.text
    return None
