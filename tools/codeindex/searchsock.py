"""`xihe search` asking a running `xihe serve`: the socket, its protocol, and the client.

A serve with the code feature listens on `<index_dir>/search.sock` (a Unix socket, mode 0600, owned
by the serve's user; no port, no token: the file's permissions are the access control, the serve
refuses a peer of another uid, and the client refuses a listener of another uid). A search sends one
JSON line, its `code.yaml` text included, and reads back one header line and the output:

    → {"v": 2, "repo": "/abs/path", "query": "...", "k": 10, "json": false,
       "index_dir": "<as code.yaml names it>", "code_yaml": "<the file's text>"}
    ← b"ok <n>\\n" followed by exactly n bytes: what `xihe search` prints (UTF-8)
      or b"error <why>\\n"

The serve validates that `code.yaml` text itself (cached by text) and answers only when it names the
same `index_dir` and validates to the same settings as the serve's own (`index_dir` and `repos`
aside); it brings that repository's index up to date first (the same `git status` check and update
as a local search) and prints the hits as the local path does, so both paths print the same bytes.
Anything else (no socket, a dead one, another user's, another repository or settings, a bad answer,
no answer within `ANSWER_SECONDS`) and the caller searches locally.

This module is what a fresh `xihe search` process imports before it has its answer, so it imports
only modules that are loaded at interpreter start-up anyway (`os`, `sys`, `re`) and the socket's C
module `_socket` (the `socket` module's enum set-up alone costs about 2 ms), and writes its JSON by
hand (`json` costs about 1 ms).
"""

from __future__ import annotations

import _socket
import os
import re
import sys

SOCKET_NAME = "search.sock"
VERSION = 2
MAX_ANSWER = 16 << 20  # an answer of 1,000 hits is ~200 KB
MAX_REQUEST = 256 * 1024  # the request carries code.yaml (the config loader's cap is 256 KB)
CONNECT_SECONDS = 1.0
ANSWER_SECONDS = 10.0  # a serve busy building its index is passed over: the search runs locally
MAX_PATH = 107  # sun_path holds 108 bytes with the terminating NUL
UCRED = 12  # struct ucred {pid_t pid; uid_t uid; gid_t gid;}

# a top-level `index_dir: value` line, read without a YAML parser: only a guess of where the socket
# is; the serve checks that the validated code.yaml names the same index_dir (settings.py reads the
# validated snapshot's place the same way)
INDEX_DIR = re.compile(
    rb"""^index_dir:[ \t]*(?:"([^"\n]*)"|'([^'\n]*)'|([^\s#'"][^\n#]*?))[ \t]*(?:#.*)?$""", re.M
)
_SHORT = {"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", '"': '\\"', "\\": "\\\\"}
_ESCAPES = {i: f"\\u{i:04x}" for i in range(0x20)} | {ord(c): e for c, e in _SHORT.items()}


def socket_path(index_dir: str) -> str:
    """`<index_dir>/search.sock`, absolute (a relative index_dir is from the current directory)."""
    return os.path.join(os.path.abspath(index_dir), SOCKET_NAME)


def index_dir_named(raw: bytes) -> str | None:
    """The index_dir a code.yaml's bytes seem to name (None when no top-level line names it)."""
    m = INDEX_DIR.search(raw)
    if m is None:
        return None
    return next(g for g in m.groups() if g is not None).decode("utf-8", "replace")


def json_string(text: str) -> str:
    """`text` as a JSON string, non-ASCII kept (as `json.dumps(text, ensure_ascii=False)`)."""
    return '"' + text.translate(_ESCAPES) + '"'


def request_line(
    repo: str, query: str, k: int, as_json: bool, index_dir: str, code_yaml: str
) -> bytes | None:
    """The request's JSON line (None when it cannot be sent: a lone surrogate, or too long)."""
    fields = (
        f'{{"v": {VERSION}, "repo": {json_string(repo)}, "query": {json_string(query)}, "k": {int(k)}, '
        f'"json": {"true" if as_json else "false"}, "index_dir": {json_string(index_dir)}, '
        f'"code_yaml": {json_string(code_yaml)}}}\n'
    )
    try:
        line = fields.encode("utf-8")
    except UnicodeEncodeError:  # an argument that was not valid UTF-8 on the command line
        return None
    return line if len(line) <= MAX_REQUEST else None


def listener_uid(conn: _socket.socket) -> int | None:
    """The uid of the process that listens at the other end (Linux SO_PEERCRED), or None."""
    try:
        raw = conn.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, UCRED)
    except (OSError, AttributeError):
        return None
    return int.from_bytes(raw[4:8], sys.byteorder)


def framed(answer: bytes) -> bytes | None:
    """The output of an `ok <n>` answer with exactly n bytes after its header, or None."""
    head, sep, body = answer.partition(b"\n")
    word, _, size = head.partition(b" ")
    if not sep or word != b"ok" or not size.isdigit() or int(size) != len(body):
        return None
    return body


def ask(
    index_dir: str, request: bytes, uid: int | None = None, answer_seconds: float = ANSWER_SECONDS
) -> bytes | None:
    """The serve's output for one request line, or None: search locally then.

    `uid`: whose serve is trusted (default: this process's user)."""
    path = os.fsencode(socket_path(index_dir))
    if len(path) > MAX_PATH:
        return None
    want = os.getuid() if uid is None else uid
    conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        conn.settimeout(CONNECT_SECONDS)
        conn.connect(path)
        if listener_uid(conn) != want:  # another user's process took the name: never trust its answer
            return None
        conn.settimeout(answer_seconds)
        conn.sendall(request)
        chunks, size = [], 0
        while chunk := conn.recv(65536):
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_ANSWER:
                return None
    except OSError:  # no socket, nobody listening (a crashed serve's file), refused, timed out
        return None
    finally:
        conn.close()
    return framed(b"".join(chunks))
