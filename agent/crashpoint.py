"""Named points where a test may kill the process, to hit a crash window exactly.

`XIHE_TEST_CRASH_AT=<name>` makes the process exit at once (status 137, like SIGKILL: no cleanup,
no flushing, no `finally`) when it reaches `crash_point(<name>)`. Unset, a crash point does nothing.
The names: `after_confirm_update` (a `/confirm` was recorded, the task not yet resumed),
`before_tool_effect` (a step's `running` row is written, the tool not yet called) and
`after_tool_effect` (the tool returned, its outcome not yet recorded).
"""

from __future__ import annotations

import os

ENV = "XIHE_TEST_CRASH_AT"


def crash_point(name: str) -> None:
    """Exit the process now if the test asked to crash at `name`."""
    if os.environ.get(ENV) == name:
        os._exit(137)
