"""Text printed to a terminal: escape sequences, control characters and bidi overrides dropped.

A terminal is a destination of its own (agent/cli/terminal.py): outside text (a DS error, shell
output, a file name in a code search hit) may carry escape sequences that would recolour, retitle or
rewrite the screen. Here, below the CLI, so that a serve printing for `xihe search` uses the same.
"""

from __future__ import annotations

import re

from xihe.agent.wecom_markdown import drop_invisible

ESCAPE = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|[@-Z\\-_])")  # CSI sequences (arrow keys) and 2-byte escapes
# OSC (title, hyperlink) and DCS/PM/APC strings up to their terminator, and their 8-bit forms
STRING = re.compile(r"(?:\x1b[\]P^_]|[\x90\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?")


def shown(text: str) -> str:
    """`text` safe to print: no escape sequence, control character or bidi override; lines kept."""
    out = ESCAPE.sub("", STRING.sub("", text.replace("\r\n", "\n").replace("\r", "\n")))
    return drop_invisible(out.replace("\x1b", ""))
