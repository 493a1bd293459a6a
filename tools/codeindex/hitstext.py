"""What `xihe search` prints for its hits: the same bytes whether this process searched or a running
serve answered over `<index_dir>/search.sock` (the serve prints with this function, searchserver.py)."""

from __future__ import annotations

import json
from typing import Any

from xihe.agent.terminal_text import shown  # a file name or symbol may carry escape sequences


def hits_text(hits: list[dict[str, Any]], as_json: bool) -> str:
    """`Hit.to_json()` dicts as printed: one JSON line with `--json`, else one line per hit."""
    if as_json:
        return json.dumps(hits, ensure_ascii=False) + "\n"
    if not hits:
        return "no matching implementation in the repository\n"
    return "".join(
        shown(f"{h['score']:.4f}  {h['path']}:{h['start']}-{h['end']}  {h['symbol']}") + "\n" for h in hits
    )
