"""A DolphinScheduler run's state as people read it, in their language.

Shared by the DolphinScheduler messages (`xihe.tools.dolphin.messages`) and the task report, which
shows how a task's run ended (its outcome `run FAILURE`).
"""

from __future__ import annotations

from xihe.agent.i18n import Catalog, Lang, say

STATES: Catalog = {  # DolphinScheduler states as people read them (English keeps DS's own words)
    "SUCCESS": {"en": "SUCCESS", "zh": "成功"},
    "FAILURE": {"en": "FAILURE", "zh": "失败"},
    "STOP": {"en": "STOP", "zh": "已停止"},
    "KILL": {"en": "KILL", "zh": "已终止"},
    "PAUSE": {"en": "PAUSE", "zh": "已暂停"},
    "BLOCK": {"en": "BLOCK", "zh": "已阻塞"},
    "RUNNING": {"en": "RUNNING", "zh": "运行中"},
    "SUBMITTED": {"en": "SUBMITTED", "zh": "已提交"},
    "SERIAL_WAIT": {"en": "SERIAL_WAIT", "zh": "串行等待中"},
    "READY_STOP": {"en": "READY_STOP", "zh": "正在停止"},
    "READY_PAUSE": {"en": "READY_PAUSE", "zh": "正在暂停"},
    "DELAY_EXECUTION": {"en": "DELAY_EXECUTION", "zh": "延时执行"},
    "FAILOVER": {"en": "FAILOVER", "zh": "容错中"},
}


def state_text(state: str, lang: Lang) -> str:
    """A DS state for people: `RUNNING_EXECUTION` reads RUNNING; zh names it in Chinese."""
    short = state.replace("_EXECUTION", "").replace("SUBMITTED_SUCCESS", "SUBMITTED")
    return say(STATES, short, lang) if short in STATES else short
