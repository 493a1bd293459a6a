"""Fixtures: temporary git repositories and a code config whose index lives in tmp_path."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from xihe.config.code import CodeConfig
from xihe.tools.codeindex.embed import WordLlamaEmbedder


def git(root: Path, *args: str) -> str:
    """Run git in `root` with a fixed identity; return stdout."""
    return subprocess.run(
        ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


@pytest.fixture(scope="session")
def shared_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One shared cache (prebuilt Chinese dictionaries, agent/cachedir.py) for the session, not the user's."""
    return tmp_path_factory.mktemp("xihe-cache")


@pytest.fixture(autouse=True)
def _shared_cache(shared_cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XIHE_CACHE_DIR", str(shared_cache_dir))


@pytest.fixture(scope="session")
def embedder() -> WordLlamaEmbedder:
    """One wordllama model for the whole session (it loads from the wheel, offline)."""
    return WordLlamaEmbedder()


@pytest.fixture
def cfg(tmp_path: Path) -> CodeConfig:
    """Default config with the index under tmp_path."""
    return CodeConfig(index_dir=str(tmp_path / "index"))


@pytest.fixture
def make_repo(tmp_path: Path) -> Callable[..., Path]:
    """Create a repository from {relative path: text}; git-initialised and committed unless git=False."""

    def make(files: dict[str, str], use_git: bool = True, name: str = "repo") -> Path:
        root = tmp_path / name
        for rel, text in files.items():
            p = root / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text, encoding="utf-8")
        root.mkdir(exist_ok=True)
        if use_git:
            git(root, "init", "-q")
            git(root, "add", "-A")
            git(root, "commit", "-qm", "initial")
        return root

    return make


ORDERS_PY = '''"""Order handling."""
import time

TIMEOUT_SECONDS = 900


class OrderStateMachine:
    """Moves an order between states."""

    def on_timeout(self, order):
        """Cancel an order that was not paid in time."""
        order.state = "cancelled"
        notify_owner(order)


def notify_owner(order):
    """Send a message to the order's owner."""
    return order.owner
'''

MAILER_JAVA = """package demo;

/** Sends e-mail through SMTP. */
public class Mailer {
    /** Deliver one message to its recipients. */
    public void deliver(Message m) {
        transport.send(m);
    }
}
"""
