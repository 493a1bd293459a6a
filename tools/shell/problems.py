"""What is wrong with one argument or token of a shell request, in zh and en.

A refusal's headline is in tools/shell/messages.py (REASONS); the problem it quotes (the closest
entry's mismatch, a bad value) is one of these entries. The English text is what the model, the
audit and `xihe shell check` read; values are quoted as before (`'..'`, `argv[2]`).
"""

from __future__ import annotations

from xihe.agent.i18n import Catalog, Text, text

PROBLEMS: Catalog = {
    # a value of an argument (tools/shell/values.py); the argument's name comes from the caller
    "nul": {"en": "contains a NUL byte", "zh": "含有 NUL 字节"},
    "line_break": {"en": "contains a line break {char}", "zh": "含有换行符 {char}"},
    "control": {"en": "contains the control character {char}", "zh": "含有控制字符 {char}"},
    "invisible": {
        "en": "contains the invisible or bidirectional character {char}",
        "zh": "含有不可见或双向控制字符 {char}",
    },
    "space": {"en": "contains the unusual space {char}", "zh": "含有不常见的空白字符 {char}"},
    "non_ascii": {
        "en": "contains the non-ASCII character {char}; only ASCII is allowed here",
        "zh": "含有非 ASCII 字符 {char}；这里只允许 ASCII",
    },
    "look_alike": {"en": "contains {char}, a look-alike of {of}", "zh": "含有 {char}，它长得像 {of}"},
    "shell_char": {"en": "contains the shell metacharacter {char}", "zh": "含有 shell 元字符 {char}"},
    "glob_char": {
        "en": "contains the glob character {char}; no globbing here",
        "zh": "含有通配符 {char}；这里不做通配",
    },
    "too_long": {
        "en": "is {length} characters long; the limit is {limit}",
        "zh": "有 {length} 个字符，上限是 {limit}",
    },
    "empty": {"en": "is empty", "zh": "是空的"},
    "option": {
        "en": "starts with '-' and would be read as an option: {value}",
        "zh": "以“-”开头，会被当成选项：{value}",
    },
    "env": {
        "en": "looks like an environment assignment ({name}=...)",
        "zh": "像是环境变量赋值（{name}=...）",
    },
    "enum_type": {"en": "must be a string, one of: {choices}", "zh": "必须是字符串，取值之一：{choices}"},
    "not_choice": {"en": "{value} is not one of: {choices}", "zh": "{value} 不在允许的取值里：{choices}"},
    "integer_type": {"en": "must be an integer", "zh": "必须是整数"},
    "not_integer": {"en": "{value} is not a decimal integer", "zh": "{value} 不是十进制整数"},
    "out_of_range": {"en": "{number} is outside {min}..{max}", "zh": "{number} 不在 {min}..{max} 范围内"},
    "string_type": {"en": "must be a string", "zh": "必须是字符串"},
    "pattern": {
        "en": "{value} does not match the pattern {pattern}",
        "zh": "{value} 不符合格式 {pattern}",
    },
    "path_type": {"en": "must be a string path", "zh": "必须是字符串路径"},
    "backslash": {"en": "contains a backslash", "zh": "含有反斜杠"},
    "traversal": {"en": "contains '..': {value} (path traversal)", "zh": "含有“..”：{value}（路径穿越）"},
    "outside": {"en": "{value} is outside the workspace {root}", "zh": "{value} 在工作区 {root} 之外"},
    "unresolvable": {"en": "cannot be resolved: {error}", "zh": "无法解析：{error}"},
    "symlink": {
        "en": "{value} leads outside the workspace through a symlink",
        "zh": "{value} 通过符号链接指向工作区之外",
    },
    "missing_path": {"en": "{value} does not exist in the workspace", "zh": "{value} 在工作区里不存在"},
    "not_dir": {"en": "{value} is not a directory", "zh": "{value} 不是目录"},
    "not_file": {"en": "{value} is not a regular file", "zh": "{value} 不是普通文件"},
    "no_root": {"en": "has no workspace root configured", "zh": "没有配置工作区根目录"},
    # a request against the whitelist (tools/shell/whitelist.py, matching.py)
    "not_command": {
        "en": "{name} is not a whitelisted command{hint} Available: {available}",
        "zh": "{name} 不是白名单里的命令{hint}可用的有：{available}",
    },
    "did_you_mean": {"en": "; did you mean {name}?", "zh": "；你是不是想用 {name}？"},
    "bad_argument": {
        "en": "entry {entry}: argument {arg} {problem}",
        "zh": "条目 {entry}：参数 {arg} {problem}",
    },
    "command_type": {
        "en": "command must be an entry name (a string)",
        "zh": "command 必须是条目名（字符串）",
    },
    "args_type": {
        "en": "args must be an object of argument name -> value",
        "zh": "args 必须是“参数名 -> 值”的对象",
    },
    "not_argument": {
        "en": "entry {entry}: {key} is {what}; it takes: {takes}",
        "zh": "条目 {entry}：{key} {what}；它接受的参数：{takes}",
    },
    "an_env": {
        "en": "an environment variable; the environment is fixed by the whitelist",
        "zh": "是环境变量；环境变量由白名单固定",
    },
    "not_its_argument": {"en": "not an argument of this entry", "zh": "不是这个条目的参数"},
    "nothing": {"en": "nothing", "zh": "无"},
    "none": {"en": "none", "zh": "无"},
    "missing_argument": {
        "en": "entry {entry}: missing argument {name} ({description})",
        "zh": "条目 {entry}：缺少参数 {name}（{description}）",
    },
    "flag_not_allowed": {
        "en": "entry {entry}: flag {flag} is not among the allowed flags ({allowed})",
        "zh": "条目 {entry}：选项 {flag} 不在允许的选项里（{allowed}）",
    },
    "flag_twice": {
        "en": "entry {entry}: flag {flag} given twice in flags",
        "zh": "条目 {entry}：选项 {flag} 在 flags 里出现了两次",
    },
    "argv_too_long": {
        "en": "entry {entry}: the command line would be {total} characters; the limit is {limit}",
        "zh": "条目 {entry}：命令行会有 {total} 个字符，上限是 {limit}",
    },
    "token": {"en": "argv[{n}] {problem}", "zh": "argv[{n}] {problem}"},
    # where a `/sh` line stops matching the closest template
    "extra": {
        "en": "unexpected extra argument {token} at argv[{n}]{hint}",
        "zh": "argv[{n}] 多出了参数 {token}{hint}",
    },
    "allowed_flags": {"en": " (allowed flags: {flags})", "zh": "（允许的选项：{flags}）"},
    "flag_here": {
        "en": "flag {flag} is not among the allowed flags ({flags})",
        "zh": "选项 {flag} 不在允许的选项里（{flags}）",
    },
    "missing": {"en": "missing {expected} at argv[{n}]", "zh": "argv[{n}] 缺少 {expected}"},
    "expected": {
        "en": "expected {expected} at argv[{n}], got {token}",
        "zh": "argv[{n}] 应是 {expected}，实际是 {token}",
    },
}


def problem(key: str, /, **values: object) -> Text:
    """The `key` problem with its values."""
    return text(PROBLEMS, key, **values)
