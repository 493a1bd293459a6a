"""What went wrong in a failed DolphinScheduler task, in one line, from its log tail."""

from __future__ import annotations

import re
from collections.abc import Sequence

_ERROR_LINE = re.compile(r"error|exception|failed|traceback", re.IGNORECASE)


def error_line(lines: Sequence[str], task: str, state: str) -> str:
    """The log's last error-looking line (cut to 500 characters), else the bare fact of the ending."""
    errors = [ln for ln in lines if _ERROR_LINE.search(ln)]
    return errors[-1].strip()[:500] if errors else f"task {task} ended {state}"
