"""On-call: who a team's rotation (config/oncall.yaml) puts on call at a time, changed by overrides
from chat (`/oncall take`, `/oncall swap`), and the lookup the alert pipeline asks (`RotationOnCall`).

    rotation   pure: the shift in force at a time (hand-off in the rotation's zone), overrides applied
    lookup     `on_call` (pure) and `RotationOnCall`, the alert pipeline's `OnCallLookup`
    command    `/oncall` arguments → what to show or which override to store (pure, errors name the argument)
    overrides  the `oncall_override` table
    view       the answer, as WeCom markdown
    feature    the service and the chat command
"""
