"""What people read about `/sh`, in the conversation's language (zh and en).

A refusal is a code with values (REASONS): its English text is `ShellRefused.reason`, which the
model, the audit and `xihe shell check` read; `refusal_text` renders it for people. The finer
problem a refusal quotes (the closest entry's mismatch, a bad value) is a catalog text too
(tools/shell/problems.py), said in the same language. A run's result keeps its English text for the model;
`result_for_people` restates its first line (exit code, time, sandbox) and the full-output note, and
shows the program's output as outside text (inert in WeCom markdown).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from xihe.agent.i18n import Catalog, Lang, Text, said, say, say_md
from xihe.agent.wecom_markdown import block

REASONS: Catalog = {
    "line_too_long": {
        "en": "the command line is {length} characters; the limit is {limit}",
        "zh": "命令行有 {length} 个字符，上限是 {limit}",
    },
    "line_nul": {"en": "the command line contains a NUL byte", "zh": "命令行里有 NUL 字节"},
    "line_break": {
        "en": "the command line contains a line break (one command per message)",
        "zh": "命令行里有换行（每条消息只能有一条命令）",
    },
    "operator": {
        "en": "the command line contains the shell operator {operator}; there is no shell: one whitelisted "
        "command per message",
        "zh": "命令行里有 shell 操作符 {operator}；这里没有 shell：每条消息只能有一条白名单命令",
    },
    "split": {"en": "cannot split the command line: {error}", "zh": "无法拆分命令行：{error}"},
    "empty": {"en": "empty command line", "zh": "命令行是空的"},
    "env_assignment": {
        "en": "{name}=... sets an environment variable; the environment comes from the whitelist only",
        "zh": "{name}=... 会设置环境变量；环境变量只能来自白名单",
    },
    "several": {
        "en": "the command matches several entries ({names}); ask an admin to make them distinct",
        "zh": "这条命令匹配了多个条目（{names}）；请管理员把它们区分开",
    },
    "none_whitelisted": {"en": "no commands are whitelisted", "zh": "白名单里没有命令"},
    "not_program": {
        "en": "{program} is not a whitelisted program; closest entry {closest} ({template}): {detail}",
        "zh": "{program} 不是白名单里的程序；最接近的条目是 {closest}（{template}）：{detail}",
    },
    "no_match": {
        "en": "no whitelisted command matches; closest entry {closest} ({template}): {detail}",
        "zh": "没有匹配的白名单命令；最接近的条目是 {closest}（{template}）：{detail}",
    },
}

SH: Catalog = {
    "refused": {"en": "Refused, nothing was run: {reason}", "zh": "已拒绝，没有执行任何命令：{reason}"},
    "none": {
        "en": "No shell commands are configured on this bot.",
        "zh": "这个机器人没有配置任何 shell 命令。",
    },
    "usage": {
        "en": "Usage: /sh COMMAND LINE, e.g. `/sh git log --oneline -n 5 -- agent`. `/help sh` lists yours.",
        "zh": "用法：/sh 命令行，例如 `/sh git log --oneline -n 5 -- agent`。`/help sh` 列出你能用的命令。",
    },
    # /help sh: the entries this user may run, and what to do next in chat
    "help_head": {
        "en": "Commands you may run (`<...>` is yours to fill in):",
        "zh": "你能执行的命令（`<...>` 由你填写）：",
    },
    "help_entry": {
        "en": "- `/sh {template}` — {description}{note}",
        "zh": "- `/sh {template}` —— {description}{note}",
    },
    "help_on": {"en": " (on {environments})", "zh": "（在 {environments}）"},
    "help_confirm": {"en": " (asks for your /confirm)", "zh": "（需要你 /confirm）"},
    "help_next": {
        "en": "Type one of these lines after /sh with your values; a line that matches none is refused with "
        "the closest entry and why. Need another command? Ask an admin to whitelist it.",
        "zh": "在 /sh 后面输入其中一行并填好值；不匹配的会被拒绝，并告诉你最接近的条目和原因。需要别的命令？请管理员把它加进白名单。",
    },
    "help_nothing": {
        "en": "No whitelisted command is open to you; an admin can grant one (`/policy` shows who may run what).",
        "zh": "没有你能执行的白名单命令；管理员可以授权（`/policy` 可以看谁能执行什么）。",
    },
    "exit": {
        "en": "$ {entry}: exit code {code} in {seconds}s [sandbox: {sandbox}]",
        "zh": "$ {entry}：退出码 {code}，耗时 {seconds} 秒［沙箱：{sandbox}］",
    },
    "killed": {
        "en": "$ {entry}: killed by {by} in {seconds}s [sandbox: {sandbox}]",
        "zh": "$ {entry}：被 {by} 终止，耗时 {seconds} 秒［沙箱：{sandbox}］",
    },
    "killed_limit": {
        "en": "$ {entry}: killed by {by} ({limit}) in {seconds}s [sandbox: {sandbox}]",
        "zh": "$ {entry}：被 {by}（{limit}）终止，耗时 {seconds} 秒［沙箱：{sandbox}］",
    },
    "artifact": {"en": "(full output: artifact {ref})", "zh": "（完整输出：附件 {ref}）"},
    # the sandbox cannot run a matched command
    "no_sandbox": {
        "en": "refusing to run {entry}: sandbox {sandbox} is not available on this host (install bubblewrap, "
        "start Docker, or have an admin set sandbox: none)",
        "zh": "拒绝执行 {entry}：这台主机上没有可用的沙箱 {sandbox}（请安装 bubblewrap、启动 Docker，"
        "或请管理员设置 sandbox: none）",
    },
    "uids_busy": {
        "en": "all {count} sandbox uids ({first}..{last}) are in use by running commands; try again when one "
        "finishes (or widen run_as_uids in shell.yaml)",
        "zh": "{count} 个沙箱 uid（{first}..{last}）都被正在运行的命令占用；请等其中一个结束后再试"
        "（或在 shell.yaml 里扩大 run_as_uids）",
    },
    "no_cgroup": {
        "en": "refusing to run {entry}: cannot create its cgroup: {error}",
        "zh": "拒绝执行 {entry}：无法为它创建 cgroup：{error}",
    },
    "not_started": {
        "en": "the command did not run: the sandbox failed before starting it ({error}); the exit code is the sandbox's",
        "zh": "命令没有执行：沙箱在启动它之前就失败了（{error}）；退出码是沙箱的",
    },
}


STATUS: Catalog = {  # the sandbox's line under /help
    "disabled": {
        "en": "⚠️ **SHELL SANDBOX DISABLED** (`sandbox: none` in shell.yaml): whitelisted commands run "
        "directly on the bot's host with its privileges.",
        "zh": "⚠️ **SHELL 沙箱已关闭**（shell.yaml 里是 `sandbox: none`）：白名单命令直接在机器人所在的主机上、"
        "以它的权限执行。",
    },
    "missing": {
        "en": "⚠️ Shell: commands are refused: sandbox {sandbox} is not available on this host{why}.",
        "zh": "⚠️ Shell：命令会被拒绝：这台主机上没有可用的沙箱 {sandbox}{why}。",
    },
    "why": {"en": " ({why})", "zh": "（{why}）"},
    "ok": {
        "en": "Shell: commands run in {sandbox}; {n} whitelisted commands.",
        "zh": "Shell：命令在沙箱 {sandbox} 里执行；共 {n} 条白名单命令。",
    },
    "warning": {"en": "⚠️ Shell sandbox: {warning}.", "zh": "⚠️ Shell 沙箱：{warning}。"},
    "reload_failed": {
        "en": "⚠️ shell.yaml reload failed, the last good version is running: {error}",
        "zh": "⚠️ shell.yaml 重新加载失败，仍在用上一个正确的版本：{error}",
    },
}


def refusal_text(code: str, values: Mapping[str, object], reason: str | Text, lang: Lang) -> str:
    """`/sh`'s reply to a refused line: its headline `code`, else its `reason` (from a catalog or English).
    The user's own words quoted in it are encoded as outside text (`say_md`)."""
    shown = say_md(REASONS, code, lang, **values) if code in REASONS else said(reason, lang)
    return say_md(SH, "refused", lang, reason=shown)


def head_text(
    entry: str, exit_code: int | None, seconds: float, sandbox: str, by: str | None, limit: str | None
) -> str:
    """The first line of a run's result, in English (what the model reads)."""
    return say(SH, _head_key(by, limit), "en", **_head_values(entry, exit_code, seconds, sandbox, by, limit))


def artifact_text(ref: str) -> str:
    """The note naming the artifact with the full output, in English."""
    return say(SH, "artifact", "en", ref=ref)


def not_started_text(error: str) -> str:
    """The note that the sandbox failed before the command started, in English."""
    return say(SH, "not_started", "en", error=error)


def _head_key(by: str | None, limit: str | None) -> str:
    return "exit" if by is None else "killed_limit" if limit else "killed"


def _head_values(
    entry: str, exit_code: int | None, seconds: float, sandbox: str, by: str | None, limit: str | None
) -> dict[str, object]:
    return {
        "entry": entry,
        "code": exit_code,
        "seconds": f"{seconds:.1f}",
        "sandbox": sandbox,
        "by": by,
        "limit": limit,
    }


HEAD = re.compile(
    r"^\$ (?P<entry>\S+): (?:exit code (?P<code>-?\d+)|killed by (?P<by>\S+)(?: \((?P<limit>[^)]*)\))?) "
    r"in (?P<seconds>[\d.]+)s \[sandbox: (?P<sandbox>[^\]]*)\]$"
)
ARTIFACT = re.compile(r"^\(full output: artifact (?P<ref>\S+)\)$")


def result_for_people(text: str, lang: Lang) -> str:
    """A run's result as `/sh` shows it: the first line and the full-output note in `lang`; the
    program's own output as it printed it, encoded as outside text for WeCom markdown (`block`)."""
    lines = text.split("\n")
    head = HEAD.match(lines[0])
    if head is None:
        return block(text)
    tail = ARTIFACT.match(lines[-1]) if len(lines) > 1 else None
    output = lines[1:-1] if tail is not None else lines[1:]
    if lang != "en":
        g = head.groupdict()
        values = _head_values(
            g["entry"], int(g["code"] or 0), float(g["seconds"]), g["sandbox"], g["by"], g["limit"]
        )
        lines[0] = say(SH, _head_key(g["by"], g["limit"]), lang, **values)
    shown = [lines[0], *([block("\n".join(output))] if output else [])]
    if tail is not None:
        shown.append(say(SH, "artifact", lang, ref=tail["ref"]) if lang != "en" else lines[-1])
    return "\n".join(shown)
