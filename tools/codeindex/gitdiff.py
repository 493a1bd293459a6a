"""What changed in a git work tree since an indexed commit (committed, staged, unstaged, untracked)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Changes:
    """Paths changed since a commit, by kind; `renamed` pairs are (old, new)."""

    added: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    renamed: list[tuple[str, str]] = field(default_factory=list)

    def paths(self) -> set[str]:
        """Every path whose index entry must be refreshed (both sides of a rename)."""
        out = set(self.added) | set(self.modified) | set(self.deleted)
        for old, new in self.renamed:
            out.update((old, new))
        return out


def _git(root: Path, *args: str) -> str | None:
    try:
        proc = subprocess.run(
            ["git", "-C", str(root), "-c", "core.quotepath=off", *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def head(root: Path) -> str | None:
    """The commit HEAD points at, or None outside a git work tree (or before the first commit)."""
    out = _git(root, "rev-parse", "--verify", "-q", "HEAD")
    return out.strip() if out else None


def parse_name_status(out: str) -> Changes:
    """Parse `git diff --name-status -M -z` output."""
    fields = out.split("\0")
    ch = Changes()
    i = 0
    while i < len(fields) and fields[i]:
        status = fields[i]
        code = status[0]
        if code in "RC":
            old, new = fields[i + 1], fields[i + 2]
            if code == "R":
                ch.renamed.append((old, new))
            else:
                ch.added.append(new)
            i += 3
            continue
        path = fields[i + 1]
        {"A": ch.added, "D": ch.deleted}.get(code, ch.modified).append(path)
        i += 2
    return ch


def changes_since(root: Path, commit: str) -> Changes | None:
    """Changes from `commit` to the work tree, untracked files as added; None if git cannot say."""
    diff = _git(root, "diff", "--name-status", "-M", "-z", commit, "--")
    if diff is None:
        return None  # unknown commit (history rewritten) or not a repo: the caller reconciles in full
    ch = parse_name_status(diff)
    untracked = _git(root, "ls-files", "--others", "--exclude-standard", "-z")
    if untracked:
        ch.added.extend(p for p in untracked.split("\0") if p)
    return ch


def dirty_paths(root: Path) -> list[str]:
    """Paths that differ from HEAD right now (so a later revert to HEAD is noticed too)."""
    commit = head(root)
    if commit is None:
        return []
    ch = changes_since(root, commit)
    return sorted(ch.paths()) if ch is not None else []


@dataclass(frozen=True)
class Status:
    """HEAD and the paths that differ from it (staged, unstaged, untracked; both sides of a rename)."""

    head: str | None
    paths: list[str]


def parse_status(out: str) -> Status:
    """Parse `git status --porcelain=v2 --branch --untracked-files=all -z` output."""
    fields = out.split("\0")
    head: str | None = None
    paths: set[str] = set()
    i = 0
    while i < len(fields):
        entry = fields[i]
        i += 1
        if entry.startswith("# branch.oid "):
            oid = entry.removeprefix("# branch.oid ").strip()
            head = None if oid == "(initial)" else oid
        elif entry.startswith("1 "):
            paths.add(entry.split(" ", 8)[8])
        elif entry.startswith("2 "):  # a rename or copy: the new path, then the old one in the next field
            paths.add(entry.split(" ", 9)[9])
            if i < len(fields) and fields[i]:
                paths.add(fields[i])
            i += 1
        elif entry.startswith("u "):
            paths.add(entry.split(" ", 10)[10])
        elif entry.startswith("? "):
            paths.add(entry[2:])
    return Status(head, sorted(paths))


def status(root: Path) -> Status | None:
    """HEAD and what differs from it, in one `git status` (the index file is not rewritten); None
    outside a git work tree or when git fails."""
    out = _git(
        root,
        "--no-optional-locks",
        "status",
        "--porcelain=v2",
        "--branch",
        "--untracked-files=all",
        "--ignore-submodules=none",
        "-z",
    )
    return parse_status(out) if out is not None else None
