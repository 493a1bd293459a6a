"""Examples and help that fit: every `/sh` example the product shows (in /help, /help sh, the usage
reply and config/shell.yaml's comments) passes the shipped whitelist and gate; `/help sh` lists only
the entries the asking user may run, with the next step in chat, not a server command."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from tests.conftest import REPO, write_config
from xihe.agent.app import App, build_app
from xihe.agent.gate import Allow, Confirm, identify
from xihe.agent.i18n import LANGS, say
from xihe.agent.inbound import Inbound
from xihe.config.shell.file import load_shell_config
from xihe.tools.shell.messages import SH
from xihe.tools.shell.policy import gate_decision
from xihe.tools.shell.whitelist import Whitelist

SHIPPED = (REPO / "config" / "shell.yaml").read_text(encoding="utf-8")


def shipped_app(tmp_path: Path, language: str = "en") -> App:
    """The shipped access.yaml and shell.yaml, its workspace a checkout with an agent/ folder here."""
    cfg = write_config(tmp_path / f"cfg-{language}", overrides={"language": language})
    checkout = tmp_path / "checkout"
    (checkout / "agent").mkdir(parents=True, exist_ok=True)
    (cfg / "shell.yaml").write_text(SHIPPED.replace("/srv/xihe/checkout", str(checkout)), encoding="utf-8")
    return build_app(cfg, database_url=f"sqlite:///{tmp_path / 'x.db'}")


@pytest.fixture
def app(tmp_path: Path) -> App:
    return shipped_app(tmp_path)


def ask(app: App, user: str, text: str) -> str:
    return app.session.handle(Inbound(user, f"c-{user}", text))


def shown_examples(app: App) -> set[str]:
    """Every concrete `/sh ...` line (no `<placeholder>`) the bot or the shipped file shows."""
    texts = [ask(app, user, q) for user in ("alice", "bob", "dave") for q in ("/help", "/help sh", "/sh")]
    texts += [say(SH, "usage", lang) for lang in LANGS]
    found = {m.strip() for t in texts for m in re.findall(r"`/sh ([^`<＜]+)`", t)}  # ＜＞: encoded
    comments = [line for line in SHIPPED.splitlines() if line.lstrip().startswith("#")]
    found |= {m.strip() for c in comments for m in re.findall(r"xihe shell check .*? -- (.+)$", c)}
    found |= {m.strip() for c in comments for m in re.findall(r"/sh ([^`<]+?)`", c)}
    return {line for line in found if not line.isupper()}  # `/sh COMMAND LINE` is the syntax, not an example


def test_every_shown_example_passes_the_shipped_whitelist_and_gate(app: App) -> None:
    examples = shown_examples(app)
    assert "git log --oneline -n 5 -- agent" in examples  # /help, /help sh, the usage reply, the file
    whitelist = Whitelist(load_shell_config((app.settings.directory / "shell.yaml").read_text()))
    access = app.settings.access
    for line in examples:
        match = whitelist.match_line(line)  # raises ShellRefused when the whitelist refuses it
        assert match.argv[: len(shlex.split(line)) - 1] == tuple(shlex.split(line))[:-1], line
        decision = gate_decision(match, identify("alice", access), access)
        assert isinstance(decision, Allow | Confirm), (line, decision.reason)


def test_help_sh_lists_only_what_this_user_may_run(app: App) -> None:
    alice = ask(app, "alice", "/help sh")
    assert "`/sh git log --oneline -n ＜count＞ -- ＜path＞` — Show recent commits" in alice
    assert (
        "`/sh ruff check --fix --diff ＜path＞` — Apply ruff's" in alice
        and "(asks for your /confirm)" in alice
    )
    assert "kubectl" not in alice  # operators only
    bob = ask(app, "bob", "/help sh")
    assert (
        "`/sh kubectl rollout status deployment/＜deployment＞ --namespace ＜namespace＞ --timeout=60s`"
        in bob
    )
    assert "(on test, staging)" in bob and "ruff" not in bob  # developers only
    for text in (alice, bob):
        assert "xihe " not in text  # a chat-level next step, never a server command
        assert "Type one of these lines after /sh with your values" in text
    assert ask(app, "carol", "/help sh").startswith("There is no command /sh you may use. Try /help.")


def test_help_sh_in_chinese(tmp_path: Path) -> None:
    zh = ask(shipped_app(tmp_path, "zh"), "alice", "/help sh")
    assert "你能执行的命令" in zh and "在 /sh 后面输入其中一行" in zh and "（需要你 /confirm）" in zh
