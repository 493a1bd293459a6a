"""Turn a request into a validated argv: the model's (entry, args) form, or a `/sh` line matched to one template.

Nothing here runs a program or a shell. Every refusal is a `ShellRefused` naming the entry that
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
from xihe.config.shell.template import FLAGS_MARKER, PLACEHOLDER
from xihe.tools.shell import messages
from xihe.tools.shell.problems import problem
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
class Lit:
    """A literal template item."""

    text: str


@dataclass(frozen=True)
class Slot:
    """A placeholder, possibly embedded between a literal prefix and suffix."""

    arg: str
    prefix: str = ""
    suffix: str = ""

    @property
    def whole(self) -> bool:
        """True when the placeholder is the whole argv item (then it must not look like an option)."""
        return not self.prefix and not self.suffix


@dataclass(frozen=True)
class Group:
    """An optional run of items, kept only when every argument in it is given."""

    items: tuple[Lit | Slot, ...]


@dataclass(frozen=True)
class Flags:
    """Where the allowed optional flags go."""


Item = Lit | Slot | Group | Flags


@dataclass(frozen=True)
class Match:
    """A request that matched one entry: the argv that will run and the values that built it."""

    entry: Entry
    argv: tuple[str, ...]
    values: Mapping[str, str] = field(default_factory=dict)
    flags: tuple[str, ...] = ()


def _compile_part(text: str) -> Lit | Slot:
    m = PLACEHOLDER.search(text)
    if not m:
        return Lit(text)
    return Slot(m.group(1), text[: m.start()], text[m.end() :])


def compile_template(entry: Entry) -> tuple[Item, ...]:
    """The entry's argv template as items (the config loader has already cross-checked it)."""
    items: list[Item] = []
    for raw in entry.argv:
        if isinstance(raw, list):
            items.append(Group(tuple(_compile_part(p) for p in raw)))
        elif raw == FLAGS_MARKER:
            items.append(Flags())
        else:
            items.append(_compile_part(raw))
    return tuple(items)


def template_text(entry: Entry) -> str:
    """A human form of the template, e.g. `git log -n <count> -- <path>`."""
    out: list[str] = []
    for item in compile_template(entry):
        if isinstance(item, Group):
            out.append("[" + " ".join(_part_text(p) for p in item.items) + "]")
        elif isinstance(item, Flags):
            out.append("[" + "|".join(entry.flags) + "]...")
        else:
            out.append(_part_text(item))
    return " ".join(out)


def _part_text(p: Lit | Slot) -> str:
    return p.text if isinstance(p, Lit) else f"{p.prefix}<{p.arg}>{p.suffix}"


@dataclass(frozen=True)
class _Fail:
    depth: int  # tokens matched before failing; a structural match that failed validation is deepest
    reason: str | Text
    argument: str | None


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

    @staticmethod
    def render_values(entry: Entry, values: Mapping[str, str], flags: Sequence[str]) -> tuple[str, ...]:
        """Fill the entry's template with already-validated values (also used to render redacted argv)."""
        argv: list[str] = []

        def part(p: Lit | Slot) -> str:
            return p.text if isinstance(p, Lit) else p.prefix + values[p.arg] + p.suffix

        for item in compile_template(entry):
            if isinstance(item, Group):
                if all(p.arg in values for p in item.items if isinstance(p, Slot)):
                    argv += [part(p) for p in item.items]
            elif isinstance(item, Flags):
                argv += flags
            else:
                argv.append(part(item))
        return tuple(argv)

    def check_match(self, match: Match) -> Match | None:
        """The entry's read-only `check:` command for the same values, or None when it has none."""
        entry = match.entry
        if entry.check is None:
            return None
        check = entry.model_copy(update={"argv": entry.check, "flags": [], "writes": False, "risk": "read"})
        return Match(entry=check, argv=self.render_values(check, match.values, ()), values=match.values)

    def _render(self, entry: Entry, values: Mapping[str, str], flags: tuple[str, ...]) -> Match:
        argv = self.render_values(entry, values, flags)
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
        fails: dict[str, _Fail] = {}
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

    def _try(self, entry: Entry, tokens: Sequence[str]) -> Match | _Fail:
        captured: dict[str, str] = {}
        flags: list[str] = []
        found = _walk(entry, self._templates[entry.name], 0, list(tokens), 0, captured, flags)
        if isinstance(found, _Fail):
            return found
        values, flag_list = found
        try:
            return self.from_args(entry.name, values, flag_list)
        except ShellRefused as exc:
            return _Fail(len(tokens) + 1, exc.problem, exc.argument)


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


def _part_match(p: Lit | Slot, token: str) -> str | None:
    """The captured value when `token` fits the part ('' for a literal), else None."""
    if isinstance(p, Lit):
        return "" if token == p.text else None
    if (
        token.startswith(p.prefix)
        and token.endswith(p.suffix)
        and len(token) >= len(p.prefix) + len(p.suffix)
    ):
        return token[len(p.prefix) : len(token) - len(p.suffix)]
    return None


def _expect(p: Lit | Slot, entry: Entry) -> str:
    return repr(p.text) if isinstance(p, Lit) else f"<{p.arg}>" if p.whole else repr(_part_text(p))


def _walk(
    entry: Entry,
    items: Sequence[Item],
    i: int,
    tokens: list[str],
    j: int,
    captured: dict[str, str],
    flags: list[str],
) -> tuple[dict[str, str], list[str]] | _Fail:
    """Backtracking match of template items[i:] against tokens[j:]; the deepest failure wins."""
    if i == len(items):
        if j == len(tokens):
            return dict(captured), list(flags)
        extra = tokens[j]
        hint = problem("allowed_flags", flags=", ".join(entry.flags)) if entry.flags else ""
        why = problem("extra", token=repr(extra[:60]), n=j, hint=hint)
        return _Fail(j, why, _token_arg(extra, j))
    item = items[i]
    if isinstance(item, Flags):
        best: _Fail | None = None
        # try taking 0..n allowed flags here; fewer first so later literals get their chance
        k = j
        while True:
            got = _walk(entry, items, i + 1, tokens, k, captured, flags + tokens[j:k])
            if not isinstance(got, _Fail):
                return got
            best = got if best is None or got.depth > best.depth else best
            if k < len(tokens) and tokens[k] in entry.flags and tokens[k] not in tokens[j:k]:
                k += 1
            else:
                # a dash token the rest of the template stumbles on right away is a disallowed flag
                if k < len(tokens) and tokens[k].startswith("-") and best.depth <= k + 1:
                    flags_text = ", ".join(entry.flags)
                    why = problem("flag_here", flag=repr(tokens[k][:60]), flags=flags_text)
                    return _Fail(k + 1, why, "flags")
                return best
    if isinstance(item, Group):
        with_group = _walk_seq(entry, item.items, items, i, tokens, j, captured, flags)
        if not isinstance(with_group, _Fail):
            return with_group
        without = _walk(entry, items, i + 1, tokens, j, captured, flags)
        if not isinstance(without, _Fail):
            return without
        return with_group if with_group.depth >= without.depth else without
    if j >= len(tokens):
        return _Fail(
            j,
            problem("missing", expected=_expect(item, entry), n=j),
            item.arg if isinstance(item, Slot) else f"argv[{j}]",
        )
    value = _part_match(item, tokens[j])
    if value is None:
        return _Fail(
            j,
            problem("expected", expected=_expect(item, entry), n=j, token=repr(tokens[j][:60])),
            item.arg if isinstance(item, Slot) else _token_arg(tokens[j], j),
        )
    if isinstance(item, Slot):
        return _walk(entry, items, i + 1, tokens, j + 1, {**captured, item.arg: value}, flags)
    return _walk(entry, items, i + 1, tokens, j + 1, captured, flags)


def _walk_seq(
    entry: Entry,
    parts: Sequence[Lit | Slot],
    items: Sequence[Item],
    i: int,
    tokens: list[str],
    j: int,
    captured: dict[str, str],
    flags: list[str],
) -> tuple[dict[str, str], list[str]] | _Fail:
    """Match an optional group's parts in order, then the rest of the template."""
    new = dict(captured)
    for n, p in enumerate(parts):
        if j + n >= len(tokens):
            return _Fail(
                j + n,
                problem("missing", expected=_expect(p, entry), n=j + n),
                p.arg if isinstance(p, Slot) else f"argv[{j + n}]",
            )
        value = _part_match(p, tokens[j + n])
        if value is None:
            return _Fail(
                j + n,
                problem("expected", expected=_expect(p, entry), n=j + n, token=repr(tokens[j + n][:60])),
                p.arg if isinstance(p, Slot) else _token_arg(tokens[j + n], j + n),
            )
        if isinstance(p, Slot):
            new[p.arg] = value
    return _walk(entry, items, i + 1, tokens, j + len(parts), new, flags)


def _token_arg(token: str, position: int) -> str:
    """How a refusal names a token that is not an argument: by its position."""
    return f"argv[{position}]"


def _screen(token: str) -> Text | None:
    """Characters no token may hold anywhere (NUL, controls, bidi, invisible), or None."""
    try:
        check_invisible(token)
    except BadValue as exc:
        return exc.text
    return None
