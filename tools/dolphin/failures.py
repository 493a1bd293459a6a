"""Why a DolphinScheduler tool could not do what was asked, in the conversation's language (zh and en).

Each refusal or failure is a catalog entry with its values (`Text`): the English text is what the
model and the audit read (unchanged wording: the model is told to ask the user or to stop), the
same entry in Chinese is what a Chinese conversation reads when a command fails. An error of the
DolphinScheduler API keeps its code and message, and says which argument of the call it was about.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from xihe.agent.errors import DolphinError
from xihe.agent.i18n import Catalog, Text, text
from xihe.agent.run_states import state_text
from xihe.config.dolphin import DolphinConfig
from xihe.integrations.dolphinscheduler.errors import DolphinAuthError
from xihe.tools.dolphin.messages import DS
from xihe.tools.dolphin.names import CatalogEntry

FAILS: Catalog = {
    "not_configured": {
        "en": "dolphin is not configured on this bot",
        "zh": "这个机器人没有配置 DolphinScheduler",
    },
    "catalog_unreadable": {
        "en": "cannot read the workflow list from DolphinScheduler: {error}",
        "zh": "无法从 DolphinScheduler 读取工作流列表：{error}",
    },
    "offline": {
        "en": "cannot run it: workflow {workflow} (project {project}, code {code}) is {state}; release it "
        "in DolphinScheduler before running it",
        "zh": "无法运行：工作流 {workflow}（项目 {project}，编号 {code}）的状态是 {state}；"
        "请先在 DolphinScheduler 里上线它再运行",
    },
    "not_online": {"en": "not online", "zh": "未上线"},
    "OFFLINE": {"en": "OFFLINE", "zh": "已下线"},
    "in_project": {"en": " in project {project}", "zh": "（项目 {project}）"},
    "ambiguous": {
        "en": "'{name}' matches several workflows{where}: {options}. Ask the user which one they mean "
        "and call again with that exact name (and project).",
        "zh": "“{name}”{where}匹配了多个工作流：{options}。你指的是哪一个？",
    },
    "label": {"en": "{name} (project {project}{state})", "zh": "{name}（项目 {project}{state}）"},
    "label_state": {"en": ", {state}", "zh": "，{state}"},
    "offline_mark": {"en": ", offline", "zh": "，已下线"},
    "unknown": {
        "en": "no workflow called '{name}'{where} in DolphinScheduler.{hint}",
        "zh": "DolphinScheduler 里{where}没有叫“{name}”的工作流。{hint}",
    },
    "closest": {"en": " Closest names: {names}.", "zh": "最接近的名字：{names}。"},
    "no_project": {
        "en": "no DolphinScheduler project called '{project}' ({error})",
        "zh": "DolphinScheduler 里没有叫“{project}”的项目（{error}）",
    },
    "no_instance": {
        "en": "there is no workflow instance {id} in {where}",
        "zh": "{where}里没有工作流实例 {id}",
    },
    "project": {"en": "project {project}", "zh": "项目 {project}"},
    "any_project": {"en": "any project the bot can see", "zh": "机器人能看到的任何项目"},
    "instance_unreadable": {
        "en": "cannot read instance {id} from DolphinScheduler: {error}",
        "zh": "无法从 DolphinScheduler 读取实例 {id}：{error}",
    },
    "rerun_ended": {
        "en": "instance {id} already ended {state}; only a FAILURE run can be rerun",
        "zh": "实例 {id} 已经结束，状态是 {state}；只有失败的运行才能重跑",
    },
    "rerun_running": {
        "en": "instance {id} is still {state}; it can be rerun once it has failed",
        "zh": "实例 {id} 仍是 {state}；失败之后才能重跑",
    },
    "stop_ended": {
        "en": "instance {id} already ended {state}; there is nothing to stop",
        "zh": "实例 {id} 已经结束，状态是 {state}；没有什么可停止的",
    },
    "start_offline": {
        "en": "DolphinScheduler refused to start {workflow}: it is not online (DS {code}). "
        "Release it in DolphinScheduler first.",
        "zh": "DolphinScheduler 拒绝启动 {workflow}：它没有上线（DS {code}）。请先在 DolphinScheduler 里上线它。",
    },
    # an error of the DolphinScheduler API during a call, for people (the model reads the raw error)
    "api_error": {
        "en": "DolphinScheduler answered error {code} ({argument}): {message}",
        "zh": "DolphinScheduler 返回错误 {code}（{argument}）：{message}",
    },
    "auth": {
        "en": "DolphinScheduler rejects the bot's credentials (HTTP 401: token missing or expired, or the "
        "user is disabled), so nothing was done. To fix it, {fix}.",
        "zh": "DolphinScheduler 拒绝了机器人的凭据（HTTP 401：令牌缺失或已过期，或用户已停用），所以什么都没有做。"
        "解决办法：{fix}。",
    },
}

DS_ERROR = re.compile(r"DS error -?\d+: (?P<msg>.*)$", re.S)


def fail(key: str, /, **values: object) -> Text:
    """The `key` failure with its values."""
    return text(FAILS, key, **values)


def ds_state(state: str) -> Text:
    """A DolphinScheduler state as a value: English keeps DS's own word, Chinese names it."""
    return Text({"s": {"en": state, "zh": state_text(state, "zh")}}, "s")


def label(e: CatalogEntry) -> Text:
    """A workflow in a list of choices: its name, project and (when not online) release state."""
    state: Text | str = ""
    if not e.online:
        state = (
            fail("offline_mark")
            if e.release_state == "OFFLINE"
            else fail("label_state", state=e.release_state.lower())
        )
    return fail("label", name=e.name, project=e.project, state=state)


def labels(entries: Sequence[CatalogEntry]) -> tuple[Text, ...]:
    """Several workflows, said as a list."""
    return tuple(label(e) for e in entries)


def release_state(e: CatalogEntry) -> Text | str:
    """A definition's release state as a value (`not online` when DS gave none)."""
    if not e.release_state:
        return fail("not_online")
    return fail("OFFLINE") if e.release_state == "OFFLINE" else e.release_state


def explained(exc: DolphinError, cfg: DolphinConfig | None, argument: str) -> DolphinError:
    """`exc` told to people: rejected credentials with the fix, or DS's error code and message with the
    argument of the call it concerned (`workflow 'order_sync'`, `instance_id 123`); any other failure
    (a timeout, an HTTP 5xx) as it is."""
    if isinstance(exc, DolphinAuthError):
        if cfg is not None and cfg.token_env:
            fix = text(DS, "fix_token", env=cfg.token_env)
        elif cfg is not None:
            fix = text(DS, "fix_password", user=cfg.user, env=cfg.password_env)
        else:
            fix = text(DS, "fix_token", env="the token variable")
        return exc.explained(fail("auth", fix=fix))
    found = DS_ERROR.search(str(exc))
    if exc.code is not None and found is not None:
        return exc.explained(fail("api_error", code=exc.code, argument=argument, message=found["msg"]))
    return exc  # a transport failure: its own text says what failed


def raw_or_told(exc: DolphinError) -> Text:
    """`exc` as a value inside another message: its raw English text where the model reads it, its
    explanation (`explained`), when it has one, in Chinese."""
    people = exc.text if exc.text is not None else str(exc)
    return Text({"e": {"en": "{raw}", "zh": "{people}"}}, "e", {"raw": str(exc), "people": people})
