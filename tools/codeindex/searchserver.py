"""The serve side of `<index_dir>/search.sock` (protocol in `searchsock.py`): a running bot answers
`xihe search` from the indexes it has loaded, after bringing the asked repository's index up to date.

The socket is bound in a private (0700) directory, made 0600, then renamed into place, so it is never
reachable with looser permissions; a peer of another uid is refused as well. Stopping removes the
file only while it is still this server's (another serve may have taken the name over since).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import socket
import socketserver
import struct
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from xihe.tools.codeindex.api import Hit
from xihe.tools.codeindex.hitstext import hits_text
from xihe.tools.codeindex.live import LiveIndexes, LiveRepo
from xihe.tools.codeindex.searchsock import MAX_PATH, MAX_REQUEST, VERSION, socket_path
from xihe.tools.codeindex.treewatch import TreeWatch

log = logging.getLogger("xihe.codeindex")
READ_SECONDS = 5.0  # a client that connects and sends nothing is dropped
MAX_QUERY = 1000
MAX_K = 1000
KEPT_CONFIGS = 16  # code.yaml texts whose validation is remembered
_IGNORED = ("index_dir", "repos")  # where indexes live and which repos a serve keeps: not the ranking

# hits (`Hit.to_json()` dicts) and whether --json was asked -> exactly what `xihe search` prints
Render = Callable[[list[dict[str, Any]], bool], str]


def settings_digest(config: dict[str, Any]) -> str:
    """The sha1 of a validated code config's JSON dump, without the keys that do not change a ranking."""
    kept = {k: v for k, v in config.items() if k not in _IGNORED}
    return hashlib.sha1(json.dumps(kept, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def read_line(conn: socket.socket, limit: int) -> bytes | None:
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


def validated(code_yaml: str) -> tuple[str, str] | None:
    """(settings digest, index_dir) of a client's code.yaml text as `load_file` would read it, or None
    when it does not validate (the client's local path then reports why)."""
    from xihe.config.code import load

    try:
        cfg = load(code_yaml.replace("\r\n", "\n").replace("\r", "\n"))  # read_text's newlines
    except Exception:  # ConfigError(s): not ours to report
        return None
    dump = cfg.model_dump(mode="json")
    return settings_digest(dump), dump["index_dir"]


def peer_uid(conn: socket.socket) -> int | None:
    """The uid of the process at the other end of a Unix socket (Linux SO_PEERCRED), or None."""
    try:
        raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except (OSError, AttributeError):
        return None
    return int(struct.unpack("3i", raw)[1])


def _request(line: bytes | None) -> dict[str, Any] | str:
    """The checked request, or what is wrong with it."""
    if line is None:
        return "no request line"
    try:
        req = json.loads(line)
    except ValueError:
        return "not JSON"
    if not isinstance(req, dict) or req.get("v") != VERSION:
        return f"protocol version: want {VERSION}"
    for key, kind in (
        ("repo", str),
        ("query", str),
        ("k", int),
        ("json", bool),
        ("index_dir", str),
        ("code_yaml", str),
    ):
        if not isinstance(req.get(key), kind) or (kind is int and isinstance(req.get(key), bool)):
            return f"{key}: missing or not a {kind.__name__}"
    if not req["query"].strip() or len(req["query"]) > MAX_QUERY:
        return f"query: empty or over {MAX_QUERY} characters"
    if not 1 <= req["k"] <= MAX_K:
        return f"k: not in 1..{MAX_K}"
    return req


class Busy(Exception):
    """The repository's index is being refreshed by another thread (a job, the webhook)."""


class SearchServer:
    """Answers `xihe search` over `<index_dir>/search.sock` while the bot runs."""

    def __init__(self, indexes: LiveIndexes, render: Render = hits_text) -> None:
        self.indexes = indexes
        self.render = render
        self._configs: dict[str, tuple[str, str] | None] = {}  # code.yaml text -> validated()
        self.path = Path(socket_path(indexes.cfg.index_dir))
        self._server: socketserver.ThreadingUnixStreamServer | None = None
        self._thread: threading.Thread | None = None
        self._inode: tuple[int, int] | None = None
        self._check = threading.Lock()
        self._configs_lock = threading.Lock()
        self._watches: dict[Path, TreeWatch] = {}

    def digest(self) -> str:
        """The settings digest of the config this bot searches with."""
        return settings_digest(self.indexes.cfg.model_dump(mode="json"))

    def answer(self, line: bytes | None, uid: int | None) -> dict[str, Any]:
        """The answer to one request line from a peer of `uid`."""
        if uid != os.getuid():
            return {"error": "peer is another user"}
        req = _request(line)
        if isinstance(req, str):
            return {"error": req}
        settings = self._validated(req["code_yaml"])
        if settings is None:
            return {"error": "code.yaml does not validate"}
        if settings[1] != req["index_dir"]:
            return {"error": "code.yaml names another index_dir"}
        if settings[0] != self.digest():
            return {"error": "code.yaml settings differ from this serve's"}
        want = Path(req["repo"])
        repo = next((r for r in self.indexes.repos if r.root == want), None)
        if repo is None:
            return {"error": "repository not served here"}
        if repo.index is None:
            return {"error": "index not built yet"}
        try:
            hits = self._search(repo, req["query"], req["k"])
        except Busy:
            return {"error": "index being refreshed"}
        except Exception:
            log.exception("a search of %s for a client failed", repo.root)
            return {"error": "search failed"}
        return {"hits": [h.to_json() for h in hits], "json": req["json"]}

    def reply(self, line: bytes | None, uid: int | None) -> bytes:
        """The bytes sent back for one request line: `ok <n>` and the output, or `error <why>`."""
        answer = self.answer(line, uid)
        if "error" in answer:
            return f"error {answer['error']}\n".encode()
        out = self.render(answer["hits"], answer["json"]).encode("utf-8")
        return b"ok %d\n" % len(out) + out

    def _validated(self, code_yaml: str) -> tuple[str, str] | None:
        """`validated(code_yaml)`, remembered for the last KEPT_CONFIGS texts."""
        with self._configs_lock:
            if code_yaml in self._configs:
                return self._configs[code_yaml]
        found = validated(code_yaml)
        with self._configs_lock:
            if len(self._configs) >= KEPT_CONFIGS:
                self._configs.pop(next(iter(self._configs)))
            self._configs[code_yaml] = found
        return found

    def _search(self, repo: LiveRepo, query: str, k: int) -> list[Hit]:
        """What a local search does: the index brought to the tree as it is now, then searched.

        The tree's watch (treewatch.py) says whether anything changed since the last check; only then
        is `git status` run (and, while it runs, the search too: when the update changed nothing,
        that search's hits are the answer). One check at a time, so a second client cannot search
        between another's check and its update.
        """
        with self._check:
            watch = self._watches.get(repo.root)
            if watch is None:
                watch = self._watches[repo.root] = TreeWatch(repo.root)
            if not watch.changed():
                return self.indexes.search_repo(repo, query, k)
            if repo.build_lock.locked():  # a job is refreshing it (the start-up reconcile hashes every
                watch.close()  # file): the client searches at once rather than wait for that
                self._watches.pop(repo.root, None)
                raise Busy
            found: list[list[Hit]] = []
            beside = threading.Thread(
                target=lambda: found.append(self.indexes.search_repo(repo, query, k)),
                name="search-socket-query",
            )
            beside.start()
            try:
                report = self.indexes.refresh(repo)
            except Exception:
                watch.close()  # not brought up to date: the next search runs git again
                self._watches.pop(repo.root, None)
                raise
            finally:
                beside.join()
            if report.mode != "unchanged" or not found:
                return self.indexes.search_repo(repo, query, k)
            return found[0]

    def start(self) -> bool:
        """Listen (False, logged, when the socket cannot be made: the CLI then searches locally)."""
        if len(os.fsencode(self.path)) > MAX_PATH:
            log.warning("no search socket: %s is longer than %d bytes", self.path, MAX_PATH)
            return False
        owner = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                conn: socket.socket = self.request
                conn.settimeout(READ_SECONDS)
                with contextlib.suppress(OSError):  # the client left or timed out: it searches locally
                    conn.sendall(owner.reply(read_line(conn, MAX_REQUEST), peer_uid(conn)))

        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            private = Path(tempfile.mkdtemp(prefix=".sock-", dir=self.path.parent))  # mode 0700
        except OSError as exc:
            log.warning("no search socket in %s: %s", self.path.parent, exc)
            return False
        server = socketserver.ThreadingUnixStreamServer(str(private / "s"), Handler, bind_and_activate=False)
        server.daemon_threads = True
        try:
            server.server_bind()
            os.chmod(private / "s", 0o600)
            os.replace(private / "s", self.path)
            info = os.stat(self.path)
            server.server_activate()
        except OSError as exc:
            server.server_close()
            log.warning("no search socket at %s: %s", self.path, exc)
            return False
        finally:
            shutil.rmtree(private, ignore_errors=True)
        self._inode = (info.st_dev, info.st_ino)
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="search-socket", daemon=True)
        self._thread.start()
        log.info("answering xihe search on %s", self.path)
        return True

    def stop(self) -> None:
        """Stop answering and remove the socket file if it is still ours."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        with self._check:
            for watch in self._watches.values():
                watch.close()
            self._watches.clear()
        try:
            info = os.stat(self.path)
            if (info.st_dev, info.st_ino) == self._inode:
                os.unlink(self.path)
        except OSError:
            pass
