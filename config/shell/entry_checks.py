"""Cross-checks of one whitelisted command that pydantic cannot express: (loc, problem) pairs.

The argv template against the declared arguments, flags, workspace and cwd, the environment, the
write rules, and the read-only `check:` template. `file.cross_check` runs them for every entry.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any

from xihe.config.shell.entry import Entry
from xihe.config.shell.env import dangerous_env, loader_env
from xihe.config.shell.template import FLAGS_MARKER, PLACEHOLDER, item_problem, template_args


def entry_problems(i: int, e: Entry, workspaces: Mapping[str, str]) -> list[tuple[tuple[Any, ...], str]]:
    """Cross-checks of entry number `i` against the configured `workspaces`: (loc, problem) pairs."""
    out: list[tuple[tuple[Any, ...], str]] = []
    loc: tuple[Any, ...] = ("entries", i)
    first = e.argv[0]
    if not isinstance(first, str) or PLACEHOLDER.search(first) or first == FLAGS_MARKER:
        out.append(((*loc, "argv"), "argv[0] must be a literal program name"))
    used: list[str] = []
    markers = 0
    for j, item in enumerate(e.argv):
        parts = item if isinstance(item, list) else [item]
        if isinstance(item, list):
            if not item:
                out.append(((*loc, "argv", j), "an optional group must not be empty"))
            if not template_args(item):
                out.append(((*loc, "argv", j), "an optional group needs at least one placeholder"))
            if FLAGS_MARKER in item:
                out.append(((*loc, "argv", j), "{flags} cannot be inside an optional group"))
            for name in template_args(item):
                if name in e.args and e.args[name].required:
                    out.append(
                        ((*loc, "args", name), "an argument inside an optional group needs required: false")
                    )
        else:
            markers += item == FLAGS_MARKER
            for name in template_args(item):
                if name in e.args and not e.args[name].required:
                    out.append(
                        ((*loc, "args", name), "required: false is only allowed inside an optional group")
                    )
        for part in parts:
            problem = item_problem(part, e.args)
            if problem:
                out.append(((*loc, "argv", j), problem))
        used += template_args(item)
    for name in e.args:
        if name == "flags":
            out.append(((*loc, "args", name), "'flags' is reserved for the optional flags"))
        elif used.count(name) == 0:
            out.append(((*loc, "args", name), "argument is declared but not used in argv"))
        elif used.count(name) > 1:
            out.append(((*loc, "args", name), "argument is used more than once in argv"))
    if e.flags and markers != 1:
        out.append(((*loc, "flags"), "entries with flags need exactly one {flags} item in argv"))
    if not e.flags and markers:
        out.append(((*loc, "argv"), "{flags} is used but 'flags' is empty"))
    for f in e.flags:
        if not re.fullmatch(r"-{1,2}[A-Za-z0-9][A-Za-z0-9_.=:-]*", f):
            out.append(((*loc, "flags"), f"flag {f!r} must look like -x or --name[=value]"))
    if len(set(e.flags)) != len(e.flags):
        out.append(((*loc, "flags"), "duplicate flags"))
    if e.workspace is not None and e.workspace not in workspaces:
        out.append(((*loc, "workspace"), f"unknown workspace {e.workspace!r}; known: {sorted(workspaces)}"))
    cwd = PurePosixPath(e.cwd)
    if cwd.is_absolute() or ".." in cwd.parts:
        out.append(((*loc, "cwd"), "cwd must be relative to the workspace and must not contain '..'"))
    if e.cwd != "." and e.workspace is None:
        out.append(((*loc, "cwd"), "cwd needs a workspace"))
    for name, spec in e.args.items():
        if spec.type == "path":
            root = spec.root or e.workspace
            if root is None:
                out.append(((*loc, "args", name), "a path argument needs 'root' or an entry workspace"))
            elif root not in workspaces:
                out.append(((*loc, "args", name, "root"), f"unknown workspace {root!r}"))
    for key in e.env:
        if loader_env(key) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            out.append(((*loc, "env", key), f"{key} cannot be set: it injects code into programs"))
    for key in e.env_pass:
        if dangerous_env(key) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            out.append(
                ((*loc, "env_pass"), f"{key} cannot be passed through: it changes what programs load or run")
            )
    if e.writes and e.risk != "write":
        out.append(((*loc, "risk"), "an entry that writes must have risk: write"))
    if e.writes and e.workspace is None:
        out.append(((*loc, "writes"), "an entry that writes needs a workspace (it gets a throwaway copy)"))
    if e.check is not None:
        out += _check_problems(loc, e)
    return out


def _check_problems(loc: tuple[Any, ...], e: Entry) -> list[tuple[tuple[Any, ...], str]]:
    """The `check:` template: a literal program, the entry's own arguments, no {flags}."""
    assert e.check is not None
    out: list[tuple[tuple[Any, ...], str]] = []
    first = e.check[0]
    if not isinstance(first, str) or PLACEHOLDER.search(first) or first == FLAGS_MARKER:
        out.append(((*loc, "check"), "check[0] must be a literal program name"))
    for j, item in enumerate(e.check):
        parts = item if isinstance(item, list) else [item]
        if FLAGS_MARKER in parts:
            out.append(((*loc, "check", j), "{flags} cannot be used in check"))
            continue
        if isinstance(item, list) and not template_args(item):
            out.append(((*loc, "check", j), "an optional group needs at least one placeholder"))
        for part in parts:
            problem = item_problem(part, e.args)
            if problem:
                out.append(((*loc, "check", j), problem.replace("in 'args'", "in the entry's 'args'")))
        if not isinstance(item, list):
            for name in template_args(item):
                if name in e.args and not e.args[name].required:
                    out.append(((*loc, "check", j), f"{{{name}}} is optional: put it in an optional group"))
    return out
