"""A threaded HTTP server on 127.0.0.1, port 0: the base of every shipped fake.

Subclasses (or callers) supply a `handle(request) -> Response` function; the server records every
request so tests can assert on what the real client sent.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Request:
    """One request as the fake saw it."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    def form(self) -> dict[str, str]:
        """Query string and form body merged, last value wins (how Spring binds @RequestParam)."""
        merged = {k: v[-1] for k, v in self.query.items()}
        ctype = self.headers.get("content-type", "")
        if self.body and "application/x-www-form-urlencoded" in ctype:
            merged.update({k: v[-1] for k, v in parse_qs(self.body.decode(), keep_blank_values=True).items()})
        return merged

    def json(self) -> Any:
        return json.loads(self.body.decode() or "null")


@dataclass
class Response:
    """What the fake answers."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds to stall before answering (slow-upstream scenarios)

    @classmethod
    def of_json(
        cls, data: Any, status: int = 200, headers: dict[str, str] | None = None, **kw: Any
    ) -> Response:
        merged = {"Content-Type": "application/json", **(headers or {})}
        return cls(status, json.dumps(data, ensure_ascii=False).encode(), merged, **kw)


Handler = Callable[[Request], Response]


class LoopbackServer:
    """Serve `handler` on 127.0.0.1:<free port> in a daemon thread. Use as a context manager."""

    def __init__(self, handler: Handler, host: str = "127.0.0.1", port: int = 0) -> None:
        self.handler = handler
        self.requests: list[Request] = []
        self.errors: list[Exception] = []
        self._lock = threading.Lock()
        outer = self

        class _H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # keep-alive answers otherwise wait ~40 ms for the ACK

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                parts = urlsplit(self.path)
                req = Request(
                    self.command,
                    parts.path,
                    parse_qs(parts.query, keep_blank_values=True),
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                )
                with outer._lock:
                    outer.requests.append(req)
                try:
                    resp = outer.handler(req)
                except Exception as exc:  # a fake's own bug must show up, not hang the client
                    outer.errors.append(exc)
                    resp = Response(500, f"fake handler error: {exc!r}".encode())
                if resp.delay:
                    threading.Event().wait(resp.delay)
                self.send_response(resp.status)
                for k, v in resp.headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(resp.body)))
                self.end_headers()
                if resp.body:
                    self.wfile.write(resp.body)

            do_GET = do_POST = do_PUT = do_DELETE = _serve

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

        class _Server(ThreadingHTTPServer):
            # a real API's listen queue is deep: socketserver's default of 5 drops the SYNs of a burst,
            # and each dropped connection retries a second later (TCP), a delay no real server adds
            request_queue_size = 1024

            def handle_error(self, request: Any, client_address: Any) -> None:
                exc = sys.exc_info()[1]
                if isinstance(exc, ConnectionError):
                    return  # the client hung up (it timed out on a slow answer): a real server moves on
                if isinstance(exc, Exception):
                    outer.errors.append(exc)
                super().handle_error(request, client_address)

        self._httpd = _Server((host, port), _H)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> LoopbackServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
