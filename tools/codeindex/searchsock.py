"""`xihe search` asking a running `xihe serve`: the socket, its one-line protocol, and the client.

A serve with the code feature listens on `<index_dir>/search.sock` (a Unix socket, mode 0600, owned
by the serve's user; no port, no token: the file's permissions are the access control, and the serve
also refuses a peer of another uid). A search whose `code.yaml` validated to the same settings sends
one JSON line and reads one back:

    → {"v": 1, "repo": "/abs/path", "query": "...", "k": 10, "settings": "<sha1>"}
    ← {"hits": [{"path", "start", "end", "symbol", "score"}, ...]}   or   {"error": "why"}

The serve brings that repository's index up to date first (the same `git status` check and update
as a local search), so both paths print the same hits. Anything else (no socket, a dead one, another
repository or settings, a bad answer, no answer within `ANSWER_SECONDS`) and the caller searches
locally. This module imports only the standard library: the point is a fast start.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
from pathlib import Path
from typing import Any

SOCKET_NAME = "search.sock"
VERSION = 1
MAX_LINE = 1 << 20  # an answer of 1,000 hits is ~150 KB
MAX_REQUEST = 64 * 1024
CONNECT_SECONDS = 1.0
ANSWER_SECONDS = 10.0  # a serve busy building its index is passed over: the search runs locally
MAX_PATH = 107  # sun_path holds 108 bytes with the terminating NUL
_IGNORED = ("index_dir", "repos")  # where indexes live and which repos a serve keeps: not the ranking


def socket_path(index_dir: str | Path) -> Path:
    """`<index_dir>/search.sock`, absolute (a relative index_dir is from the current directory)."""
    return Path(os.path.abspath(index_dir)) / SOCKET_NAME


def settings_digest(config: dict[str, Any]) -> str:
    """The sha1 of a validated code config's JSON dump, without the keys that do not change a ranking."""
    kept = {k: v for k, v in config.items() if k not in _IGNORED}
    return hashlib.sha1(json.dumps(kept, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def _hit(item: object) -> dict[str, Any] | None:
    """One hit of an answer, checked field by field (an answer is outside text to this process)."""
    if not isinstance(item, dict) or set(item) != {"path", "start", "end", "symbol", "score"}:
        return None
    ok = (
        isinstance(item["path"], str)
        and isinstance(item["symbol"], str)
        and all(isinstance(item[k], int) and not isinstance(item[k], bool) for k in ("start", "end"))
        and isinstance(item["score"], (int, float))
        and not isinstance(item["score"], bool)
    )
    return {k: item[k] for k in ("path", "start", "end", "symbol", "score")} if ok else None


def parse_answer(line: bytes) -> list[dict[str, Any]] | None:
    """The hits of an answer line, or None when it is an error or malformed."""
    try:
        answer = json.loads(line)
    except ValueError:
        return None
    if not isinstance(answer, dict) or not isinstance(answer.get("hits"), list):
        return None
    hits = [_hit(h) for h in answer["hits"]]
    return None if any(h is None for h in hits) else [h for h in hits if h is not None]


def _read_line(conn: socket.socket, limit: int) -> bytes | None:
    """Bytes up to the first newline (None when the peer closed first or sent more than `limit`)."""
    buf = bytearray()
    while b"\n" not in buf:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        buf += chunk
        if len(buf) > limit:
            return None
    return bytes(buf[: buf.index(b"\n")])


def ask(
    index_dir: str | Path,
    repo: Path,
    query: str,
    k: int,
    digest: str,
    answer_seconds: float = ANSWER_SECONDS,
) -> list[dict[str, Any]] | None:
    """The serve's hits for `query` in `repo`, or None: search locally then."""
    path = socket_path(index_dir)
    if len(os.fsencode(path)) > MAX_PATH:
        return None
    request = {"v": VERSION, "repo": str(repo.resolve()), "query": query, "k": k, "settings": digest}
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(CONNECT_SECONDS)
        conn.connect(os.fsencode(path))
        conn.settimeout(answer_seconds)
        conn.sendall(json.dumps(request, ensure_ascii=False).encode("utf-8") + b"\n")
        line = _read_line(conn, MAX_LINE)
    except OSError:  # no socket, nobody listening (a crashed serve's file), refused, timed out
        return None
    finally:
        conn.close()
    return parse_answer(line) if line is not None else None
