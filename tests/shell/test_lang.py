"""`/sh` in the conversation's language (issue 16 item 3): refusals (the whitelist's and the gate's),
results and usage read Chinese in a Chinese conversation and English in an English one; the audit
keeps the English reason. The real loop and gate, the scripted LLM for the small talk."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.shell.conftest import bwrap_works
from tests.shell.test_injection import LINES
from tests.shell.test_product import ask, shell_audit
from xihe.agent.app import App
from xihe.agent.i18n import CJK, Text
from xihe.agent.wecom_markdown import inline
from xihe.integrations.fakes.llm_server import ScriptedLLM, call, say
from xihe.tools.shell.messages import refusal_text
from xihe.tools.shell.whitelist import ShellRefused, Whitelist

needs_bwrap = pytest.mark.skipif(not bwrap_works(), reason="bubblewrap cannot create namespaces here")


def _chinese(app: App, llm: ScriptedLLM, user: str = "alice") -> None:
    llm.add(say("好的"))
    ask(app, "你好，我想看看仓库里的文件", user=user, conv="zh")


def test_a_line_off_the_whitelist_is_refused_in_each_language(
    shell_app: Callable[..., App], llm: ScriptedLLM
) -> None:
    app = shell_app()
    _chinese(app, llm)
    zh = ask(app, "/sh rm -rf agent", conv="zh")
    assert zh.startswith("已拒绝，没有执行任何命令：'rm' 不是白名单里的程序；最接近的条目是 ")
    assert "not a whitelisted program" not in zh
    assert "命令行里有 shell 操作符 ';'" in ask(app, "/sh ls -la -- agent; rm x", conv="zh")
    assert ask(app, "/sh", conv="zh").startswith("用法：/sh 命令行")
    en = ask(app, "/sh rm -rf agent", conv="en")
    assert en.startswith("Refused, nothing was run: 'rm' is not a whitelisted program; closest entry ")
    assert ask(app, "/sh", conv="en").startswith("Usage: /sh COMMAND LINE")
    reasons = [e["reason"] for e in shell_audit(app)]
    assert all("not a whitelisted program" in r or "shell operator" in r for r in reasons)


def test_the_gates_refusal_of_an_entry_in_each_language(
    shell_app: Callable[..., App], llm: ScriptedLLM
) -> None:
    app = shell_app()
    _chinese(app, llm)
    line = "/sh kubectl rollout status deployment/order-api --namespace test"
    zh = ask(app, line, conv="zh")
    assert zh == "已拒绝：alice（角色：developer）不能执行条目“rollout”：需要以下角色之一：operator。"
    en = ask(app, line, conv="en")
    assert en == "Refused: alice (developer) may not run entry 'rollout': it needs one of the roles operator."


@needs_bwrap
def test_a_result_reads_in_each_language(shell_app: Callable[..., App], llm: ScriptedLLM) -> None:
    app = shell_app()
    _chinese(app, llm)
    zh = ask(app, "/sh ls -la -- agent", conv="zh")
    assert zh.startswith("$ ls：退出码 0，耗时 ") and "［沙箱：bwrap］" in zh and "loop.py" in zh
    assert "exit code" not in zh
    en = ask(app, "/sh ls -la -- agent", conv="en")
    assert en.startswith("$ ls: exit code 0 in ") and "[sandbox: bwrap]" in en and "loop.py" in en


def test_the_argument_a_refusal_names_reads_in_each_language(
    shell_app: Callable[..., App], llm: ScriptedLLM
) -> None:
    app = shell_app()
    _chinese(app, llm)
    zh = ask(app, "/sh ls -la -- ../etc", conv="zh")
    assert zh.endswith("：条目 'ls'：参数 'path' 含有“..”：'../etc'（路径穿越）")
    assert "contains" not in zh and "argument" not in zh
    en = ask(app, "/sh ls -la -- ../etc", conv="en")
    assert en.endswith(": entry 'ls': argument 'path' contains '..': '../etc' (path traversal)")
    assert ask(app, "/sh ls -R -- agent", conv="zh").endswith("：argv［1］ 应是 '-la'，实际是 '-R'")
    assert ask(app, "/sh ls -R -- agent", conv="en").endswith(": expected '-la' at argv［1］, got '-R'")
    count = ask(app, "/sh git log --oneline -n abc -- agent", conv="zh")
    assert count.endswith("参数 'count' 'abc' 不是十进制整数")
    assert ask(app, "/sh ls -la -- agent extra", conv="zh").endswith("argv［4］ 多出了参数 'extra'")
    hidden = ask(app, "/sh ls -la -- a\u202eb", conv="zh")
    assert (
        hidden
        == "已拒绝，没有执行任何命令：argv［3］ 含有不可见或双向控制字符 U+202E (RIGHT-TO-LEFT OVERRIDE)"
    )
    # the audit keeps the English
    reasons = [e["reason"] for e in shell_audit(app)]
    assert any(r.endswith("argument 'path' contains '..': '../etc' (path traversal)") for r in reasons)


@pytest.mark.parametrize("line", [c[0] for c in LINES], ids=[repr(c[0])[:60] for c in LINES])
def test_every_refusal_in_the_corpus_has_its_detail_in_chinese(whitelist: Whitelist, line: str) -> None:
    with pytest.raises(ShellRefused) as info:
        whitelist.match_line(line)
    exc = info.value
    zh = refusal_text(exc.code, exc.values, exc.problem, "zh")
    assert CJK.search(zh.removeprefix("已拒绝，没有执行任何命令："))
    detail = exc.values.get("detail")
    if isinstance(detail, Text):
        assert inline(detail.in_("zh")) in zh and inline(str(detail)) not in zh
    # what people read is the model's English, encoded as outside text for WeCom markdown
    assert (
        refusal_text(exc.code, exc.values, exc.problem, "en")
        == f"Refused, nothing was run: {inline(exc.reason)}"
    )


def test_the_model_reads_the_english_refusal(shell_app: Callable[..., App], llm: ScriptedLLM) -> None:
    app = shell_app()
    llm.add(call("run_shell_command", command="ls", args={"path": "../etc"}), say("不行"))
    assert ask(app, "列一下上级目录", conv="zh") == "不行"
    tool = llm.messages[-1][-1]
    assert (
        tool["role"] == "tool"
        and "argument 'path' contains '..': '../etc' (path traversal)" in tool["content"]
    )
