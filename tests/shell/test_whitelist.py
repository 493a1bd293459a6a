"""Matching that succeeds: both forms build the same argv; the closest entry is named on a miss."""

from __future__ import annotations

from pathlib import Path

import pytest

from xihe.tools.shell.capture import StreamCapture, TempArtifacts
from xihe.tools.shell.template import template_text
from xihe.tools.shell.tool import redact_args, redact_argv
from xihe.tools.shell.whitelist import ShellRefused, Whitelist


def test_chat_line_and_model_call_build_the_same_argv(whitelist: Whitelist, workspace: Path) -> None:
    by_line = whitelist.match_line("git log --oneline -n 5 -- agent")
    by_call = whitelist.from_args("git_log", {"count": 5, "path": "agent"})
    assert (
        by_line.argv == by_call.argv == ("git", "log", "--oneline", "-n", "5", "--", str(workspace / "agent"))
    )
    assert by_line.entry.name == "git_log"


@pytest.mark.parametrize(
    ("line", "entry", "tail"),
    [
        ("python3 -m pytest tests/shell", "pytest", ("{ws}/tests/shell",)),
        (
            "python3 -m pytest -x -q tests/shell -k 'test_a and not slow'",
            "pytest",
            ("-x", "-q", "{ws}/tests/shell", "-k", "test_a and not slow"),
        ),
        ("python3 -m pytest -q agent", "pytest", ("-q", "{ws}/agent")),
        ("git log --since=2026-01-31", "git_since", ("--since=2026-01-31",)),
        (
            "kubectl rollout status deployment/order-api --namespace staging",
            "rollout",
            ("deployment/order-api", "--namespace", "staging"),
        ),
        ("ls -la -- inside_link", "ls", ("{ws}/agent",)),  # a symlink inside the root is fine
        ("ls -la -- agent/", "ls", ("{ws}/agent",)),
        ("grep -rn -- 'def handle' agent", "grep", ("def handle", "{ws}/agent")),
        (
            "grep -rn -- '你好，世界' agent",
            "grep",
            ("你好，世界", "{ws}/agent"),
        ),  # CJK text and punctuation pass
    ],
)
def test_allowed_lines_match_exactly_one_entry(
    whitelist: Whitelist, workspace: Path, line: str, entry: str, tail: tuple[str, ...]
) -> None:
    match = whitelist.match_line(line)
    assert match.entry.name == entry
    expected = tuple(t.replace("{ws}", str(workspace)) for t in tail)
    assert match.argv[-len(expected) :] == expected


def test_absolute_path_inside_the_workspace_is_allowed(whitelist: Whitelist, workspace: Path) -> None:
    match = whitelist.from_args("ls", {"path": str(workspace / "agent")})
    assert match.argv[-1] == str(workspace / "agent")


def test_a_miss_names_the_closest_entry_and_the_failing_argument(whitelist: Whitelist) -> None:
    with pytest.raises(ShellRefused) as info:
        whitelist.match_line("git log --oneline -n 999 -- agent")
    assert info.value.entry == "git_log" and info.value.argument == "count"
    assert "closest entry 'git_log' (git log --oneline -n <count> -- <path>)" in info.value.reason


def test_template_text_is_readable(whitelist: Whitelist) -> None:
    assert template_text(whitelist.get("pytest")) == "python3 -m pytest [-x|-q]... <path> [-k <expr>]"


def test_secret_arguments_are_redacted(whitelist: Whitelist) -> None:
    match = whitelist.from_args("deploy_token", {"token": "abcd1234secret"})
    assert "Authorization: Bearer abcd1234secret" in match.argv
    assert "Authorization: Bearer ***" in redact_argv(match)
    assert "abcd1234secret" not in " ".join(redact_argv(match))
    assert redact_args(match) == {"token": "***"}


def test_capture_keeps_head_and_tail_and_digests_everything() -> None:
    cap = StreamCapture(head=10, tail=10, spool_cap=25)
    for i in range(100):
        cap.feed(f"{i:03d}\n".encode())
    assert cap.total == 400 and cap.truncated
    text = cap.text()
    assert text.startswith("000\n001\n00") and text.endswith("098\n099\n")
    assert "380 bytes omitted" in text
    assert len(cap.spool) == 25


def test_temp_artifacts_are_bounded(tmp_path: Path) -> None:
    store = TempArtifacts(tmp_path, max_bytes=100, max_total_bytes=250)
    refs = [store(bytes([65 + i]) * 500) for i in range(5)]
    assert all(Path(r).stat().st_size <= 100 for r in refs if Path(r).exists())
    assert sum(p.stat().st_size for p in tmp_path.iterdir()) <= 250
    assert Path(refs[-1]).exists()
