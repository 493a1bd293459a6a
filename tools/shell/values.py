"""Validation of one argument value against its ArgSpec: characters first, then the type's own rule.

Every check returns the canonical argv text or raises `BadValue(problem)`; the caller adds the
argument's name. Character checks come first so that an injection attempt is refused for what it
is (a NUL, a right-to-left override, a shell metacharacter) rather than a vague "no match".
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path, PurePosixPath

from xihe.config.shell import ArgSpec, dangerous_env

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
    """A value failed validation; str() is the problem without the argument's name."""


def _char_name(ch: str) -> str:
    fallback = "control" if unicodedata.category(ch) == "Cc" else "unnamed"
    return f"U+{ord(ch):04X} ({unicodedata.name(ch, fallback)})"


def check_invisible(value: str) -> None:
    """Refuse NUL, line breaks, controls, bidi/format/invisible characters and unusual spaces."""
    for ch in value:
        cat = unicodedata.category(ch)
        if ch == "\x00":
            raise BadValue("contains a NUL byte")
        if ch in "\n\r\x0b\x0c\x85\u2028\u2029":
            raise BadValue(f"contains a line break {_char_name(ch)}")
        if cat == "Cc":
            raise BadValue(f"contains the control character {_char_name(ch)}")
        if cat in ("Cf", "Co", "Cs", "Cn"):
            # bidi overrides, right-to-left marks, zero-width joiners, private use: text that reads
            # differently from what runs
            raise BadValue(f"contains the invisible or bidirectional character {_char_name(ch)}")
        if cat.startswith("Z") and ch != " ":
            raise BadValue(f"contains the unusual space {_char_name(ch)}")


def check_characters(value: str, spec: ArgSpec) -> None:
    """Refuse control, invisible, bidi, look-alike, shell and glob characters the spec does not allow."""
    check_invisible(value)
    for ch in value:
        cat = unicodedata.category(ch)
        if ord(ch) > 127:
            folded = unicodedata.normalize("NFKC", ch)
            if not spec.unicode_ok:
                raise BadValue(
                    f"contains the non-ASCII character {_char_name(ch)}; only ASCII is allowed here"
                )
            if ch in CONFUSABLES:
                raise BadValue(f"contains {_char_name(ch)}, a look-alike of {CONFUSABLES[ch]!r}")
            if any(c in SENSITIVE_ASCII for c in folded) or cat == "Pd":
                raise BadValue(f"contains {_char_name(ch)}, a look-alike of {folded!r}")
    for ch in value:
        if ch in SHELL_CHARS and not spec.allow_shell_chars:
            raise BadValue(f"contains the shell metacharacter {ch!r}")
        if ch in GLOB_CHARS and not spec.allow_glob:
            raise BadValue(f"contains the glob character {ch!r}; no globbing here")


def _common(value: str, spec: ArgSpec) -> None:
    """Checks every string value gets: length, characters, option and environment look."""
    if len(value) > spec.max_length:
        raise BadValue(f"is {len(value)} characters long; the limit is {spec.max_length}")
    if value == "":
        raise BadValue("is empty")
    check_characters(value, spec)
    if value.lstrip().startswith("-"):
        raise BadValue(f"starts with '-' and would be read as an option: {value[:40]!r}")
    m = ENV_ASSIGNMENT.match(value)
    if m and dangerous_env(m.group(1)):
        raise BadValue(f"looks like an environment assignment ({m.group(1)}=...)")


def check_enum(value: object, spec: ArgSpec) -> str:
    """An exact member of `choices`."""
    if not isinstance(value, str):
        raise BadValue(f"must be a string, one of: {', '.join(spec.choices)}")
    _common(value, spec)
    if value not in spec.choices:
        raise BadValue(f"{value!r} is not one of: {', '.join(spec.choices)}")
    return value


def check_integer(value: object, spec: ArgSpec) -> str:
    """A decimal integer within [min, max]."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise BadValue("must be an integer")
    text = str(value)
    if len(text) > 19 or not INTEGER.match(text):
        raise BadValue(f"{text[:40]!r} is not a decimal integer")
    number = int(text)
    assert spec.min is not None and spec.max is not None  # guaranteed by ArgSpec validation
    if not spec.min <= number <= spec.max:
        raise BadValue(f"{number} is outside {spec.min}..{spec.max}")
    return str(number)


def check_string(value: object, spec: ArgSpec) -> str:
    """A string the whole of which matches `pattern`."""
    if not isinstance(value, str):
        raise BadValue("must be a string")
    _common(value, spec)
    assert spec.pattern is not None
    if not re.fullmatch(spec.pattern, value):
        raise BadValue(f"{value[:60]!r} does not match the pattern {spec.pattern}")
    return value


def check_text(value: object, spec: ArgSpec) -> str:
    """Free text passed as one argv item; never an option."""
    if not isinstance(value, str):
        raise BadValue("must be a string")
    _common(value, spec)
    return value


def check_path(value: object, spec: ArgSpec, root: Path) -> str:
    """A path that stays inside `root` after resolving symlinks; returned absolute and resolved."""
    if not isinstance(value, str):
        raise BadValue("must be a string path")
    _common(value, spec)
    if "\\" in value:
        raise BadValue("contains a backslash")
    pure = PurePosixPath(value)
    if ".." in pure.parts:
        raise BadValue(f"contains '..': {value!r} (path traversal)")
    real_root = root.resolve()
    candidate = Path(value) if pure.is_absolute() else real_root / value
    if pure.is_absolute() and not (candidate.is_relative_to(root) or candidate.is_relative_to(real_root)):
        raise BadValue(f"{value!r} is outside the workspace {root}")
    try:
        resolved = candidate.resolve(strict=False)
    except (OSError, RuntimeError) as exc:  # symlink loops
        raise BadValue(f"cannot be resolved: {exc.__class__.__name__}") from None
    if not resolved.is_relative_to(real_root):
        raise BadValue(f"{value!r} leads outside the workspace through a symlink")
    if spec.must_exist and not resolved.exists():
        raise BadValue(f"{value!r} does not exist in the workspace")
    if spec.kind == "dir" and resolved.exists() and not resolved.is_dir():
        raise BadValue(f"{value!r} is not a directory")
    if spec.kind == "file" and resolved.exists() and not resolved.is_file():
        raise BadValue(f"{value!r} is not a regular file")
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
        raise BadValue("has no workspace root configured")
    return check_path(value, spec, root)
