"""Git push/merge webhooks (GitLab, GitHub): secret check and the changed paths, as pure functions.

The HTTP endpoint (`POST /hooks/git`, served by the code feature) calls `verify` then `parse`; after pulling the
work tree it hands `event.paths()` to `service.reindex_changed`. Missed events are covered by the
full reconcile at start-up.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class PushEvent:
    """The part of a push or merged merge-request event the index needs."""

    provider: str  # gitlab | github
    kind: str  # push | merge
    repo_url: str
    ref: str
    before: str
    after: str
    added: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    def paths(self) -> set[str]:
        """Every path touched; empty for a merge event (the caller diffs before..after or reconciles)."""
        return set(self.added) | set(self.modified) | set(self.removed)


def _header(headers: Mapping[str, str], name: str) -> str:
    for k, v in headers.items():
        if k.lower() == name.lower():
            return v
    return ""


def verify(headers: Mapping[str, str], body: bytes, secret: str) -> bool:
    """True when the request carries the shared secret: GitLab `X-Gitlab-Token` or GitHub `X-Hub-Signature-256`."""
    if not secret:
        return False  # an unset secret must never mean "accept anything"
    token = _header(headers, "X-Gitlab-Token")
    if token:
        return hmac.compare_digest(token.encode(), secret.encode())
    sig = _header(headers, "X-Hub-Signature-256")
    if sig.startswith("sha256="):
        want = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        return hmac.compare_digest(sig.encode(), want.encode())
    return False


def parse(headers: Mapping[str, str], body: bytes) -> PushEvent | None:
    """The push (or merged MR/PR) in a webhook body; None for events that change no code."""
    try:
        data: Any = json.loads(body.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict):
        return None
    gitlab_event = _header(headers, "X-Gitlab-Event")
    github_event = _header(headers, "X-GitHub-Event")
    if gitlab_event or data.get("object_kind"):
        return _gitlab(data)
    if github_event:
        return _github(github_event, data)
    return None


def _files(commits: list[dict[str, Any]]) -> tuple[list[str], list[str], list[str]]:
    """Net added/modified/removed over the commits in order (a file added then removed is removed)."""
    state: dict[str, str] = {}
    for c in commits:
        for p in c.get("added") or []:
            state[p] = "added"
        for p in c.get("modified") or []:
            state[p] = state.get(p) if state.get(p) == "added" else "modified"  # type: ignore[assignment]
        for p in c.get("removed") or []:
            state[p] = "removed"
    by = {"added": [], "modified": [], "removed": []}  # type: dict[str, list[str]]
    for p, s in sorted(state.items()):
        by[s].append(p)
    return by["added"], by["modified"], by["removed"]


def _gitlab(d: dict[str, Any]) -> PushEvent | None:
    kind = d.get("object_kind")
    project = d.get("project") or {}
    url = project.get("git_http_url") or project.get("web_url") or ""
    if kind == "push":
        a, m, r = _files(d.get("commits") or [])
        return PushEvent(
            "gitlab", "push", url, d.get("ref", ""), d.get("before", ""), d.get("after", ""), a, m, r
        )
    if kind == "merge_request":
        attrs = d.get("object_attributes") or {}
        if attrs.get("action") != "merge" and attrs.get("state") != "merged":
            return None
        target = attrs.get("target_branch", "")
        after = attrs.get("merge_commit_sha") or (attrs.get("last_commit") or {}).get("id", "")
        return PushEvent("gitlab", "merge", url, f"refs/heads/{target}" if target else "", "", after or "")
    return None


def _github(event: str, d: dict[str, Any]) -> PushEvent | None:
    repo = d.get("repository") or {}
    url = repo.get("clone_url") or repo.get("html_url") or ""
    if event == "push":
        a, m, r = _files(d.get("commits") or [])
        return PushEvent(
            "github", "push", url, d.get("ref", ""), d.get("before", ""), d.get("after", ""), a, m, r
        )
    if event == "pull_request":
        pr = d.get("pull_request") or {}
        if d.get("action") != "closed" or not pr.get("merged"):
            return None
        base = (pr.get("base") or {}).get("ref", "")
        return PushEvent(
            "github", "merge", url, f"refs/heads/{base}" if base else "", "", pr.get("merge_commit_sha") or ""
        )
    return None
