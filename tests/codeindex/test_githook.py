"""Webhook secret checks (GitLab token, GitHub HMAC) and changed-path extraction."""

from __future__ import annotations

import hashlib
import hmac
import json

from xihe.tools.codeindex.githook import parse, verify

GITLAB_PUSH = {
    "object_kind": "push",
    "ref": "refs/heads/main",
    "before": "a" * 40,
    "after": "b" * 40,
    "project": {"git_http_url": "https://git.example.invalid/g/r.git"},
    "commits": [
        {"added": ["app/new.py"], "modified": ["app/orders.py"], "removed": []},
        {"added": [], "modified": ["app/new.py"], "removed": ["src/Old.java"]},
    ],
}


def test_gitlab_token_checked_in_constant_time_and_empty_secret_refuses() -> None:
    assert verify({"X-Gitlab-Token": "s3cret"}, b"{}", "s3cret")
    assert not verify({"X-Gitlab-Token": "wrong"}, b"{}", "s3cret")
    assert not verify({"X-Gitlab-Token": ""}, b"{}", "")
    assert not verify({}, b"{}", "s3cret")


def test_github_signature_is_hmac_sha256_of_the_body() -> None:
    body = b'{"ref": "refs/heads/main"}'
    sig = "sha256=" + hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
    assert verify({"x-hub-signature-256": sig}, body, "s3cret")
    assert not verify({"x-hub-signature-256": sig}, body + b" ", "s3cret")
    assert not verify({"x-hub-signature-256": "sha256=00"}, body, "s3cret")


def test_gitlab_push_gives_net_changed_paths() -> None:
    ev = parse({"X-Gitlab-Event": "Push Hook"}, json.dumps(GITLAB_PUSH).encode())
    assert ev is not None and ev.provider == "gitlab" and ev.kind == "push"
    assert (ev.added, ev.modified, ev.removed) == (["app/new.py"], ["app/orders.py"], ["src/Old.java"])
    assert ev.paths() == {"app/new.py", "app/orders.py", "src/Old.java"}


def test_github_push_and_merged_pull_request() -> None:
    push = {
        "ref": "refs/heads/main",
        "before": "1",
        "after": "2",
        "repository": {"clone_url": "u"},
        "commits": [{"added": [], "modified": ["a.go"], "removed": ["b.go"]}],
    }
    ev = parse({"X-GitHub-Event": "push"}, json.dumps(push).encode())
    assert ev is not None and ev.paths() == {"a.go", "b.go"}
    pr = {
        "action": "closed",
        "pull_request": {"merged": True, "merge_commit_sha": "c" * 40, "base": {"ref": "main"}},
    }
    merged = parse({"X-GitHub-Event": "pull_request"}, json.dumps(pr).encode())
    assert (
        merged is not None and merged.kind == "merge" and merged.after == "c" * 40 and merged.paths() == set()
    )
    pr["pull_request"]["merged"] = False  # type: ignore[index]
    assert parse({"X-GitHub-Event": "pull_request"}, json.dumps(pr).encode()) is None


def test_gitlab_merge_request_only_when_merged_and_junk_is_ignored() -> None:
    mr = {
        "object_kind": "merge_request",
        "project": {},
        "object_attributes": {"action": "open", "target_branch": "main"},
    }
    assert parse({"X-Gitlab-Event": "Merge Request Hook"}, json.dumps(mr).encode()) is None
    mr["object_attributes"] = {"action": "merge", "target_branch": "main", "merge_commit_sha": "d" * 40}
    ev = parse({"X-Gitlab-Event": "Merge Request Hook"}, json.dumps(mr).encode())
    assert ev is not None and ev.ref == "refs/heads/main" and ev.after == "d" * 40
    assert parse({}, b"not json") is None
