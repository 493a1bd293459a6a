"""The names of the tools each feature may add, known before the feature is imported.

`agent/app.py` declares every feature with these names (they stay valid in access.yaml while the
feature is off, and a feature whose config files are absent is never imported); each feature's
module registers exactly these (a test checks it).
"""

from __future__ import annotations

DS_TOOLS = (
    "trigger_dolphinscheduler",
    "query_ds_task_status",
    "ds_failed_tasks",
    "rerun_failed",
    "stop_run",
    "pause_run",
    "resume_run",
    "force_success",
    "ds_task_log",
    "ds_recent_runs",
    "ds_failed_runs",
    "ds_schedule",
    "set_schedule",
)
GRAPH_TOOLS = ("find_callers", "find_callees", "find_references", "call_chain")
CODE_TOOLS = ("search_code", "get_code_context", *GRAPH_TOOLS)
LONGTASK_TOOLS = (
    *("plan_view", "plan_add", "plan_claim", "plan_complete", "plan_fail", "plan_revise"),
    *("remember", "recall"),
)
SHELL_TOOLS = ("run_shell_command",)
ALERT_TOOLS = ("send_wecom_alert",)
