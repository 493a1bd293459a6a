"""Who is calling xihe's MCP server: a bearer token mapped to a user of ui.yaml (the same tokens as the
web login: `token_env` or `token_sha256`). No token, or one that matches nobody: no access at all.

The comparison is constant-time per user and every user is compared, so the time taken does not say
which user (if any) a token nearly matched. Tokens are never logged or audited; only their owner is.
"""

from __future__ import annotations

import hashlib
import hmac

from xihe.config.settings import Settings
from xihe.config.ui import UI_SECTION, UiConfig


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def token_hashes(settings: Settings) -> dict[str, str]:
    """user → sha256 of their token, for the ui.yaml users whose token is available."""
    cfg = settings.get(UI_SECTION)
    if not isinstance(cfg, UiConfig):
        return {}
    out = {}
    for user, entry in cfg.users.items():
        if entry.token_sha256:
            out[user] = entry.token_sha256
        else:
            token = settings.secret(entry.token_env)
            if token:
                out[user] = _sha256(token)
    return out


def user_for(settings: Settings, token: str) -> str | None:
    """The ui.yaml user whose token this is, or None."""
    got = _sha256(token)
    found = None
    for user, want in sorted(token_hashes(settings).items()):
        if hmac.compare_digest(got, want) and found is None:
            found = user
    return found


def bearer(header: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header (None when absent or another scheme)."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None
