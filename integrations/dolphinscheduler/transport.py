"""DolphinTransport: how to talk to one DolphinScheduler 3.1-3.3 API server, below the endpoints.

Parameters are form-encoded (DS binds `@RequestParam` and never reads a JSON body); every answer
is a `{code,msg,data}` envelope whose business errors arrive under HTTP 200. Auth is a token or a
login session (re-logged once on a 401). Errors are translated here, once, into the classes of
errors.py.

Only connect errors, timeouts and 5xx of idempotent calls are retried (tenacity); a start is never
retried blindly, because a second POST would start a second run. The API profile (paths and
parameter names per version) is probed once when the version is `auto`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any
from zoneinfo import ZoneInfo

import requests
import tenacity

from xihe.agent.errors import DolphinError
from xihe.agent.redact import excerpt
from xihe.integrations.dolphinscheduler.dag import Dag
from xihe.integrations.dolphinscheduler.errors import (
    DefinitionOffline,
    DolphinAuthError,
    StartOutcomeUnknown,
    is_offline_error,
)
from xihe.integrations.dolphinscheduler.profiles import PROFILES, Profile


def _default_wait() -> tenacity.wait.wait_base:
    return tenacity.wait_exponential(multiplier=0.5, max=8)


class DolphinTransport:
    """One DolphinScheduler API server: token or login/session auth, retries, envelopes, the profile."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        user: str | None = None,
        password: str | None = None,
        version: str = "auto",
        timeout: float = 10.0,
        retries: int = 3,
        wait: tenacity.wait.wait_base | None = None,
        server_timezone: str = "UTC",
        page_size: int = 100,
        session: requests.Session | None = None,
        count_request: Callable[[], object] | None = None,  # called once per response received
    ) -> None:
        if not token and not (user and password):
            raise ValueError("DolphinClient needs a token or a user and password")
        if version not in ("auto", *PROFILES):
            raise ValueError(f"unknown DolphinScheduler version {version!r}; use auto, 3.1, 3.2 or 3.3")
        self.base_url = base_url.rstrip("/")
        self._token = token
        self._user, self._password = user, password
        self._session_id: str | None = None
        self._version = version
        self._profile: Profile | None = PROFILES.get(version)
        self.timeout = timeout
        self.retries = retries
        self._wait = wait if wait is not None else _default_wait()
        self.zone = ZoneInfo(server_timezone)
        self.page_size = page_size
        self.http = session or requests.Session()
        self.http.trust_env = False  # DS is an internal service; proxies from the environment only hurt
        if count_request is not None:
            self.http.hooks["response"].append(lambda response, *args, **kwargs: count_request())
        self._dags: dict[tuple[int, int], Dag] = {}  # (definition code, version) -> its DAG (task_total)

    def __repr__(self) -> str:  # never show the token or password
        return f"{type(self).__name__}({self.base_url!r}, version={self._version!r})"

    # ---- auth, calls, envelopes ------------------------------------------------------------------

    def _headers(self) -> dict[str, str]:
        if self._token:
            return {"token": self._token}
        if self._session_id:
            return {"sessionId": self._session_id}
        return {}

    def login(self) -> None:
        """Log in with user/password and keep the session id (session auth only)."""
        if not (self._user and self._password):
            raise DolphinAuthError("no DolphinScheduler user configured for session login")
        data = self._call(
            "POST", "/login", {"userName": self._user, "userPassword": self._password}, authed=False
        )
        session_id = (data or {}).get("sessionId") if isinstance(data, dict) else None
        if not session_id:
            raise DolphinAuthError("DolphinScheduler login returned no sessionId")
        self._session_id = str(session_id)

    def _send_once(
        self, method: str, path: str, params: dict[str, Any], idempotent: bool
    ) -> requests.Response:
        url = self.base_url + path
        try:
            if method == "GET":
                return self.http.get(url, params=params, headers=self._headers(), timeout=self.timeout)
            return self.http.post(url, data=params, headers=self._headers(), timeout=self.timeout)
        except requests.ConnectTimeout as exc:
            raise DolphinError(f"{method} {path}: connect timeout", retryable=True) from exc
        except requests.Timeout as exc:
            if not idempotent:
                raise StartOutcomeUnknown(f"{method} {path}: timed out after {self.timeout}s") from exc
            raise DolphinError(f"{method} {path}: timed out after {self.timeout}s", retryable=True) from exc
        except requests.ConnectionError as exc:
            # a refused/reset connection: for a POST the server may have read it, so stay careful
            if not idempotent:
                raise StartOutcomeUnknown(f"{method} {path}: connection failed") from exc
            raise DolphinError(f"{method} {path}: connection failed", retryable=True) from exc

    def _call(
        self,
        method: str,
        path: str,
        params: dict[str, Any] | None = None,
        *,
        idempotent: bool = True,
        authed: bool = True,
    ) -> Any:
        """One logical call: retries per policy, re-login once on 401 in session mode, envelope check."""
        params = {k: v for k, v in (params or {}).items() if v is not None}
        if authed and not self._token and not self._session_id:
            self.login()
        relogged = False

        def attempt() -> Any:
            nonlocal relogged
            resp = self._send_once(method, path, params, idempotent)
            if resp.status_code == 401 and authed and not self._token and not relogged:
                relogged = True  # the session expired or was evicted by another login: once more
                self._session_id = None
                self.login()
                resp = self._send_once(method, path, params, idempotent)
            return self._unwrap(method, path, resp, idempotent)

        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(lambda e: isinstance(e, DolphinError) and e.retryable),
            stop=tenacity.stop_after_attempt(self.retries + 1),
            wait=self._wait,
            reraise=True,
        )
        return retrying(attempt)

    def _unwrap(self, method: str, path: str, resp: requests.Response, idempotent: bool) -> Any:
        status = resp.status_code
        if status == 401:  # empty body by contract: never parse it
            raise DolphinAuthError(
                f"{method} {path}: HTTP 401 (token or session missing, expired or user disabled)"
            )
        if status >= 500:
            if not idempotent:
                raise StartOutcomeUnknown(f"{method} {path}: HTTP {status}")
            raise DolphinError(f"{method} {path}: HTTP {status}", retryable=True)
        if status not in (200, 201):
            raise DolphinError(f"{method} {path}: HTTP {status}")
        try:
            body = resp.json()
        except ValueError:
            raise DolphinError(f"{method} {path}: answer is not JSON") from None
        if not isinstance(body, dict) or "code" not in body:
            raise DolphinError(f"{method} {path}: answer is not a DS envelope")
        code = int(body["code"])
        if code != 0:
            msg = excerpt(str(body.get("msg") or ""), self._token, self._password, limit=1000)
            text = f"{method} {path}: DS error {code}: {msg}"
            if code == 10013:
                raise DolphinAuthError(text, code=code)
            if is_offline_error(code, msg):
                raise DefinitionOffline(text, code=code)
            raise DolphinError(text, code=code)
        return body.get("data")

    # ---- version --------------------------------------------------------------------------------

    @property
    def profile(self) -> Profile:
        """The API profile in use; probed once when configured as `auto`."""
        if self._profile is None:
            self._profile = PROFILES[self.probe_version()]
        return self._profile

    def probe_version(self) -> str:
        """Ask the server once: a 404 on `workflow-definition/simple-list` means pre-3.3.

        Pre-3.3 servers are driven with the 3.2 profile; the start answer (null or trigger code)
        then tells 3.1 from 3.2 where it matters.
        """
        path = "/projects/0/workflow-definition/simple-list"
        if not self._token and not self._session_id:
            self.login()

        def attempt() -> int:
            resp = self._send_once("GET", path, {}, True)
            if resp.status_code == 401 and not self._token:
                self._session_id = None
                self.login()
                resp = self._send_once("GET", path, {}, True)
            if resp.status_code == 401:
                raise DolphinAuthError(f"GET {path}: HTTP 401")
            if resp.status_code >= 500:
                raise DolphinError(f"GET {path}: HTTP {resp.status_code}", retryable=True)
            return resp.status_code

        status = tenacity.Retrying(
            retry=tenacity.retry_if_exception(lambda e: isinstance(e, DolphinError) and e.retryable),
            stop=tenacity.stop_after_attempt(self.retries + 1),
            wait=self._wait,
            reraise=True,
        )(attempt)
        return "3.2" if status == 404 else "3.3"

    # ---- paging ---------------------------------------------------------------------------------

    def _pages(
        self, path: str, params: dict[str, Any], max_pages: int = 1000
    ) -> Iterator[list[dict[str, Any]]]:
        page = 1
        while page <= max_pages:
            data = self._call("GET", path, {**params, "pageNo": page, "pageSize": self.page_size}) or {}
            items = data.get("totalList") or []
            yield items
            if page >= int(data.get("totalPage") or 0) or not items:
                return
            page += 1
