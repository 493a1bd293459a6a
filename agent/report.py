"""Task reports: which step failed, with what input, how long each took. Shared by chat, CLI and UI."""

from __future__ import annotations

from typing import Any

from xihe.agent.deps import Deps
from xihe.agent.timefmt import show


def task_data(deps: Deps, task_id: int) -> dict[str, Any]:
    """The task and its step log as plain data (the `--json` form)."""
    task = deps.tasks.get(task_id)
    steps = deps.tasks.steps(task_id)
    return {
        "task": {
            **{k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in task.__dict__.items()},
            "runs": list(task.runs),
            "shown_status": task.shown_status,
        },
        "steps": [
            {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in s.__dict__.items()}
            for s in steps
        ],
    }


def task_report(deps: Deps, task_id: int) -> str:
    """A readable step table: outcome rows only (plus attempts still running)."""
    task = deps.tasks.get(task_id)
    steps = deps.tasks.steps(task_id)
    tz = deps.settings.core.timezone
    lines = [
        f"Task #{task.id} [{task.shown_status}] {task.kind} by {task.owner}: {task.goal[:80]}",
        f"created {show(task.created_at, tz)}, updated {show(task.updated_at, tz)}",
        f"current step: {task.current_step or '-'}",
    ]
    if task.runs:
        lines.append("runs: " + ", ".join(f"{r} (/status {r})" for r in task.runs))
    finished = {(s.step_key, s.attempt) for s in steps if s.status != "running"}
    for s in steps:
        if s.status == "running" and (s.step_key, s.attempt) in finished:
            continue
        took = f"{s.duration_ms} ms" if s.duration_ms is not None else "…"
        line = f"- {s.step_key} #{s.attempt} {s.status:7} {s.tool_name} ({took})"
        if s.input_preview:
            line += f" input={s.input_preview[:120]}"
        if s.error:
            line += f" error={s.error[:160]}"
        lines.append(line)
    if task.error:
        lines.append(f"error: {task.error}")
    return "\n".join(lines)
