"""Validation of one argument value against its ArgSpec: characters first, then the type's own rule.

Every check returns the canonical argv text or raises `BadValue(problem)`; the caller adds the
argument's name. Character checks come first so that an injection attempt is refused for what it
is (a NUL, a right-to-left override, a shell metacharacter) rather than a vague "no match".
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path, PurePosixPath

from xihe.config.shell.entry import ArgSpec
from xihe.config.shell.env import dangerous_env
from xihe.tools.shell.problems import problem

SHELL_CHARS = frozenset(";&|`$<>")
GLOB_CHARS = frozenset("*?[]{}~")
ENV_ASSIGNMENT = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)=")
INTEGER = re.compile(r"^-?[0-9]{1,18}$")  # ASCII digits only: int() also accepts Arabic-Indic digits
# ASCII characters whose look-alikes are refused even where Unicode letters are allowed.
SENSITIVE_ASCII = frozenset("-/.=\\'\"") | SHELL_CHARS | GLOB_CHARS
# Look-alikes that NFKC leaves alone: dashes and minus signs (option look), slashes (path look).
CONFUSABLES = {
    **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2043\u2212\u02d7\ufe58\ufe63\uff0d\u2796", "-"),
    **dict.fromkeys("\u2215\u2044\u29f8\u2571\u27cb", "/"),
    **dict.fromkeys("\u037e\uff1b", ";"),
}


class BadValue(ValueError):
    """A value failed validation; str() is the problem without the argument's name (English), `text`
    the same problem for people in their language (tools/shell/problems.py)."""

    def __init__(self, key: str, /, **values: object) -> None:
        self.text = problem(key, **values)
        super().__init__(str(self.text))


def _char_name(ch: str) -> str:
    fallback = "control" if unicodedata.category(ch) == "Cc" else "unnamed"
    return f"U+{ord(ch):04X} ({unicodedata.name(ch, fallback)})"


def check_invisible(value: str) -> None:
    """Refuse NUL, line breaks, controls, bidi/format/invisible characters and unusual spaces."""
    for ch in value:
        cat = unicodedata.category(ch)
        if ch == "\x00":
            raise BadValue("nul")
        if ch in "\n\r\x0b\x0c\x85\u2028\u2029":
            raise BadValue("line_break", char=_char_name(ch))
        if cat == "Cc":
            raise BadValue("control", char=_char_name(ch))
        if cat in ("Cf", "Co", "Cs", "Cn"):
            # bidi overrides, right-to-left marks, zero-width joiners, private use: text that reads
            # differently from what runs
            raise BadValue("invisible", char=_char_name(ch))
        if cat.startswith("Z") and ch != " ":
            raise BadValue("space", char=_char_name(ch))


def check_characters(value: str, spec: ArgSpec) -> None:
    """Refuse control, invisible, bidi, look-alike, shell and glob characters the spec does not allow."""
    check_invisible(value)
    for ch in value:
        cat = unicodedata.category(ch)
        if ord(ch) > 127:
            folded = unicodedata.normalize("NFKC", ch)
            if not spec.unicode_ok:
                raise BadValue("non_ascii", char=_char_name(ch))
            if ch in CONFUSABLES:
                raise BadValue("look_alike", char=_char_name(ch), of=repr(CONFUSABLES[ch]))
            if any(c in SENSITIVE_ASCII for c in folded) or cat == "Pd":
                raise BadValue("look_alike", char=_char_name(ch), of=repr(folded))
    for ch in value:
        if ch in SHELL_CHARS and not spec.allow_shell_chars:
            raise BadValue("shell_char", char=repr(ch))
        if ch in GLOB_CHARS and not spec.allow_glob:
            raise BadValue("glob_char", char=repr(ch))


def _common(value: str, spec: ArgSpec) -> None:
    """Checks every string value gets: length, characters, option and environment look."""
    if len(value) > spec.max_length:
        raise BadValue("too_long", length=len(value), limit=spec.max_length)
    if value == "":
        raise BadValue("empty")
    check_characters(value, spec)
    if value.lstrip().startswith("-"):
        raise BadValue("option", value=repr(value[:40]))
    m = ENV_ASSIGNMENT.match(value)
    if m and dangerous_env(m.group(1)):
        raise BadValue("env", name=m.group(1))


def check_enum(value: object, spec: ArgSpec) -> str:
    """An exact member of `choices`."""
    if not isinstance(value, str):
        raise BadValue("enum_type", choices=", ".join(spec.choices))
    _common(value, spec)
    if value not in spec.choices:
        raise BadValue("not_choice", value=repr(value), choices=", ".join(spec.choices))
    return value


def check_integer(value: object, spec: ArgSpec) -> str:
    """A decimal integer within [min, max]."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise BadValue("integer_type")
    text = str(value)
    if len(text) > 19 or not INTEGER.match(text):
        raise BadValue("not_integer", value=repr(text[:40]))
    number = int(text)
    assert spec.min is not None and spec.max is not None  # guaranteed by ArgSpec validation
    if not spec.min <= number <= spec.max:
        raise BadValue("out_of_range", number=number, min=spec.min, max=spec.max)
    return str(number)


def check_string(value: object, spec: ArgSpec) -> str:
    """A string the whole of which matches `pattern`."""
    if not isinstance(value, str):
        raise BadValue("string_type")
    _common(value, spec)
    assert spec.pattern is not None
    if not re.fullmatch(spec.pattern, value):
        raise BadValue("pattern", value=repr(value[:60]), pattern=spec.pattern)
    return value


def check_text(value: object, spec: ArgSpec) -> str:
    """Free text passed as one argv item; never an option."""
    if not isinstance(value, str):
        raise BadValue("string_type")
    _common(value, spec)
    return value


def check_path(value: object, spec: ArgSpec, root: Path) -> str:
    """A path that stays inside `root` after resolving symlinks; returned absolute and resolved."""
    if not isinstance(value, str):
        raise BadValue("path_type")
    _common(value, spec)
    if "\\" in value:
        raise BadValue("backslash")
    pure = PurePosixPath(value)
    if ".." in pure.parts:
        raise BadValue("traversal", value=repr(value))
    real_root = root.resolve()
    candidate = Path(value) if pure.is_absolute() else real_root / value
    if pure.is_absolute() and not (candidate.is_relative_to(root) or candidate.is_relative_to(real_root)):
        raise BadValue("outside", value=repr(value), root=root)
    try:
        resolved = candidate.resolve(strict=False)
    except (OSError, RuntimeError) as exc:  # symlink loops
        raise BadValue("unresolvable", error=exc.__class__.__name__) from None
    if not resolved.is_relative_to(real_root):
        raise BadValue("symlink", value=repr(value))
    if spec.must_exist and not resolved.exists():
        raise BadValue("missing_path", value=repr(value))
    if spec.kind == "dir" and resolved.exists() and not resolved.is_dir():
        raise BadValue("not_dir", value=repr(value))
    if spec.kind == "file" and resolved.exists() and not resolved.is_file():
        raise BadValue("not_file", value=repr(value))
    return str(resolved)


def check_value(value: object, spec: ArgSpec, root: Path | None) -> str:
    """Validate `value` for `spec`; return the argv text or raise BadValue."""
    if spec.type == "enum":
        return check_enum(value, spec)
    if spec.type == "integer":
        return check_integer(value, spec)
    if spec.type == "string":
        return check_string(value, spec)
    if spec.type == "text":
        return check_text(value, spec)
    if root is None:
        raise BadValue("no_root")
    return check_path(value, spec, root)
