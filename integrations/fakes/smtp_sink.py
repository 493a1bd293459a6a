"""A loopback SMTP server (127.0.0.1, port 0) that records mail; a small socketserver implementation.

Speaks enough RFC 5321 for smtplib: EHLO/HELO, AUTH PLAIN/LOGIN (any credentials accepted, the user
recorded), MAIL, RCPT, DATA (dot-unstuffing), RSET, NOOP, QUIT. `fail_next(n, code)` answers the
next n MAIL commands with an error, to test the fallback's own failures. No STARTTLS.
"""

from __future__ import annotations

import base64
import socketserver
import threading
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage


@dataclass
class Mail:
    """One received message."""

    mail_from: str
    rcpt_to: list[str]
    data: bytes
    auth_user: str = ""

    @property
    def message(self) -> EmailMessage:
        """The parsed message."""
        msg = message_from_bytes(self.data, policy=policy.default)
        assert isinstance(msg, EmailMessage)
        return msg

    @property
    def subject(self) -> str:
        """Decoded Subject header."""
        return str(self.message["Subject"])

    @property
    def body(self) -> str:
        """Decoded text body."""
        part = self.message.get_body(("plain",))
        return part.get_content() if part is not None else ""

    @property
    def html(self) -> str:
        """Decoded HTML body ("" when the mail has none)."""
        part = self.message.get_body(("html",))
        return part.get_content() if part is not None else ""


@dataclass
class _State:
    mails: list[Mail] = field(default_factory=list)
    fail: list[int] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Handler(socketserver.StreamRequestHandler):
    server: _Server

    def _say(self, line: str) -> None:
        self.wfile.write(line.encode() + b"\r\n")

    def handle(self) -> None:
        st = self.server.state
        self._say("220 xihe-smtp-sink ready")
        mail_from, user = "", ""
        rcpt: list[str] = []
        while True:
            raw = self.rfile.readline()
            if not raw:
                return
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            verb = line.split(" ", 1)[0].upper()
            arg = line[len(verb) :].strip()
            if verb == "EHLO":
                self._say("250-xihe-smtp-sink")
                self._say("250-AUTH PLAIN LOGIN")
                self._say("250 8BITMIME")
            elif verb == "HELO":
                self._say("250 xihe-smtp-sink")
            elif verb == "AUTH":
                parts = arg.split()
                if parts and parts[0].upper() == "PLAIN":
                    token = parts[1] if len(parts) > 1 else ""
                    if not token:
                        self._say("334 ")
                        token = self.rfile.readline().decode().strip()
                    fields = base64.b64decode(token + "==").split(b"\x00")
                    user = fields[1].decode() if len(fields) > 1 else ""
                    self._say("235 2.7.0 Authentication successful")
                else:
                    self._say("334 VXNlcm5hbWU6")
                    user = base64.b64decode(self.rfile.readline().strip() + b"==").decode(errors="replace")
                    self._say("334 UGFzc3dvcmQ6")
                    self.rfile.readline()
                    self._say("235 2.7.0 Authentication successful")
            elif verb == "MAIL":
                with st.lock:
                    code = st.fail.pop(0) if st.fail else 0
                if code:
                    self._say(f"{code} sink told to fail")
                    continue
                mail_from, rcpt = arg.partition(":")[2].strip().strip("<>").split(">")[0], []
                self._say("250 OK")
            elif verb == "RCPT":
                rcpt.append(arg.partition(":")[2].strip().strip("<>").split(">")[0])
                self._say("250 OK")
            elif verb == "DATA":
                self._say("354 end with <CRLF>.<CRLF>")
                chunks = []
                while True:
                    d = self.rfile.readline()
                    if not d or d in (b".\r\n", b".\n"):
                        break
                    chunks.append(d[1:] if d.startswith(b"..") else d)
                with st.lock:
                    st.mails.append(
                        Mail(mail_from, list(rcpt), b"".join(chunks).replace(b"\r\n", b"\n"), user)
                    )
                self._say("250 OK queued")
            elif verb == "RSET":
                mail_from, rcpt = "", []
                self._say("250 OK")
            elif verb == "NOOP":
                self._say("250 OK")
            elif verb == "QUIT":
                self._say("221 bye")
                return
            else:
                self._say("502 command not implemented")


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    state: _State


class SmtpSink:
    """Records every mail; use as a context manager; `host`/`port` for the Mailer."""

    def __init__(self) -> None:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.state = _State()
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def host(self) -> str:
        """Listening address."""
        return str(self._server.server_address[0])

    @property
    def port(self) -> int:
        """Listening port."""
        return int(self._server.server_address[1])

    @property
    def mails(self) -> list[Mail]:
        """Mail received so far."""
        with self._server.state.lock:
            return list(self._server.state.mails)

    def fail_next(self, count: int = 1, code: int = 451) -> None:
        """Answer the next `count` MAIL commands with `code` (4xx transient, 5xx permanent)."""
        with self._server.state.lock:
            self._server.state.fail.extend([code] * count)

    def __enter__(self) -> SmtpSink:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
