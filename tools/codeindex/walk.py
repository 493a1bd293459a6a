"""Which files of a repository are indexed: .gitignore respected, vendored/generated/binary/huge skipped."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xihe.tools.codeindex.languages import EXTENSIONS

if TYPE_CHECKING:  # only types: a query on a saved index never imports pydantic
    from xihe.config.code import WalkConfig

# files without a grammar that are still worth windowing (configs, scripts, SQL, docs, other languages)
TEXT_EXTENSIONS = frozenset(
    [
        ".sql",
        ".sh",
        ".bash",
        ".zsh",
        ".ps1",
        ".bat",
        ".yaml",
        ".yml",
        ".toml",
        ".ini",
        ".cfg",
        ".conf",
        ".properties",
        ".xml",
        ".md",
        ".rst",
        ".txt",
        ".c",
        ".h",
        ".cc",
        ".cpp",
        ".cxx",
        ".hpp",
        ".hh",
        ".rs",
        ".rb",
        ".php",
        ".scala",
        ".kt",
        ".kts",
        ".swift",
        ".cs",
        ".lua",
        ".pl",
        ".r",
        ".gradle",
        ".groovy",
        ".proto",
        ".thrift",
        ".graphql",
        ".html",
        ".css",
        ".scss",
        ".vue",
        ".svelte",
        ".hql",
        ".dart",
        ".ex",
        ".exs",
        ".erl",
        ".clj",
        ".m",
        ".mm",
        ".jl",
        ".tf",
    ]
)
TEXT_NAMES = frozenset({"Dockerfile", "Makefile", "Jenkinsfile", "Rakefile", "Gemfile", "CMakeLists.txt"})
GENERATED_NAME = re.compile(
    r"(\.min\.(js|css)$|\.pb\.go$|_pb2(_grpc)?\.pyi?$|\.generated\.|\.g\.dart$|_generated\.|"
    r"(^|/)(package-lock\.json|yarn\.lock|pnpm-lock\.yaml|poetry\.lock|go\.sum|Cargo\.lock)$|\.bundle\.js$)"
)
GENERATED_MARK = re.compile(r"(Code generated .* DO NOT EDIT|@generated|auto-?generated|DO NOT EDIT)", re.I)


def wanted_name(rel: str) -> bool:
    """Whether the file's name or extension is one we index at all."""
    name = rel.rsplit("/", 1)[-1]
    if GENERATED_NAME.search(rel):
        return False
    dot = name.rfind(".")
    ext = name[dot:].lower() if dot > 0 else ""
    return ext in EXTENSIONS or ext in TEXT_EXTENSIONS or name in TEXT_NAMES


def read_source(path: Path, max_bytes: int) -> str | None:
    """The file as text, or None when it is too big, binary, or marked as generated."""
    try:
        if path.stat().st_size > max_bytes:
            return None
        data = path.read_bytes()
    except OSError:
        return None
    if b"\x00" in data[:8192]:
        return None
    head = data[:1024].decode("utf-8", "replace")
    if GENERATED_MARK.search("\n".join(head.splitlines()[:5])):
        return None
    return data.decode("utf-8", "replace")


_GLOB = re.compile(r"[\\\[\]*?!]")  # what gitignore's patterns read as other than itself


def _reroot(pattern: str, base: str) -> str | None:
    """A pattern from `<base>/.gitignore` rewritten relative to the repository root."""
    pattern = pattern.rstrip("\n")
    if not pattern.strip() or pattern.startswith("#"):
        return None
    if not base:
        return pattern
    neg = pattern.startswith("!")
    body = pattern[1:] if neg else pattern
    anchored = "/" in body.rstrip("/")
    base = _GLOB.sub(r"\\\g<0>", base)  # a directory named `x[1]` is itself, not a pattern (`x1`)
    base = "\\" + base if base.startswith("#") else base  # nor is `#x` a comment
    body = f"{base}/{body.lstrip('/')}" if anchored else f"{base}/**/{body}"
    return ("!" if neg else "") + body


class IgnoreRules:
    """The repository's .gitignore files (all levels) plus configured extra patterns.

    With `paths` (repository-relative files to judge), only the .gitignore files of their directories
    and those above are read: a .gitignore's patterns match below its own directory only (`_reroot`),
    so the others cannot change a verdict on these paths, and a one-file update does not walk the tree.
    """

    def __init__(self, root: Path, cfg: WalkConfig, paths: Iterable[str] | None = None) -> None:
        self.root = root
        self.skip_dirs = frozenset(cfg.skip_dirs)
        lines: list[str] = list(cfg.extra_ignore)
        for base in self._walked() if paths is None else self._above(paths):
            path = root / base / ".gitignore" if base else root / ".gitignore"
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                continue
            lines.extend(p for p in (_reroot(ln, base) for ln in text.splitlines()) if p)
        self.spec: Any = None  # no patterns: nothing to match (and pathspec is not imported)
        if lines:
            import pathspec

            self.spec = pathspec.GitIgnoreSpec.from_lines(lines)

    def _walked(self) -> Iterator[str]:
        """Every directory holding a .gitignore, root-relative, parents first (the skipped dirs left out)."""
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames[:] = [d for d in dirnames if d not in self.skip_dirs]
            if ".gitignore" in filenames:
                base = os.path.relpath(dirpath, self.root).replace(os.sep, "/")
                yield "" if base == "." else base

    def _above(self, paths: Iterable[str]) -> list[str]:
        """The directories of `paths` and those above them that the full walk would enter, parents first:
        not below a skipped directory or a link to one (`os.walk` follows neither)."""
        dirs: set[tuple[str, ...]] = {()}
        for rel in paths:
            parts = rel.split("/")[:-1]
            for i, part in enumerate(parts):
                if (
                    part in {"", ".", ".."}
                    or part in self.skip_dirs
                    or (self.root / "/".join(parts[: i + 1])).is_symlink()
                ):
                    break
                dirs.add(tuple(parts[: i + 1]))
        return ["/".join(d) for d in sorted(dirs)]

    def ignored(self, rel: str, is_dir: bool = False) -> bool:
        """Whether a root-relative path is excluded."""
        parts = rel.split("/")
        if any(p in self.skip_dirs for p in (parts if is_dir else parts[:-1])):
            return True
        return self.spec is not None and bool(self.spec.match_file(rel + "/" if is_dir else rel))


def walk_repo(root: Path, cfg: WalkConfig, rules: IgnoreRules | None = None) -> list[str]:
    """Relative paths ('/' separated, sorted) of every file that should be indexed."""
    rules = rules or IgnoreRules(root, cfg)
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        base = os.path.relpath(dirpath, root).replace(os.sep, "/")
        base = "" if base == "." else base + "/"
        dirnames[:] = sorted(
            d for d in dirnames if not rules.ignored(base + d, is_dir=True) and not d.startswith(".")
        )
        for name in filenames:
            rel = base + name
            if (
                wanted_name(rel)
                and not rules.ignored(rel)
                and not os.path.islink(os.path.join(dirpath, name))
            ):
                out.append(rel)
    return sorted(out)


def indexable(root: Path, rel: str, cfg: WalkConfig, rules: IgnoreRules) -> bool:
    """Whether one path (e.g. from a git diff) belongs in the index, by name and ignore rules."""
    if rel.startswith("/") or ".." in rel.split("/"):
        return False
    return wanted_name(rel) and not rules.ignored(rel) and (root / rel).is_file()
