"""What a server's 401 or 403 asked for, kept until the user signs in.

A connection never signs in by itself (`oauth.py`): it keeps the server's ``WWW-Authenticate``
challenge in the sign-in record and says ``needsAuth``. ``mcpServers/login`` then starts from the real
MCP request (an ``initialize`` POST); when that request does not need a token (servers that guard
only some methods, and every scope step-up: a 403 ``insufficient_scope`` on one tool), the kept
challenge is what the sign-in answers, so the scopes it asks for are the ones the server named.

Bounds: a challenge longer than `MAX_CHALLENGE` characters is refused (a scope list of kilobytes
would become an authorization URL no browser takes), and a step-up that the last sign-in already
granted, or the `MAX_STEP_UPS`-th in a row, is refused instead of sending the user round again.

Import lazily, with `oauth.py` (httpx2).
"""

from __future__ import annotations

import re
from typing import Any

import httpx2
from mcp.client.auth import OAuthFlowError

MAX_CHALLENGE = 4096  # characters of WWW-Authenticate kept and answered
MAX_SCOPES = 64  # scopes one sign-in asks for
MAX_STEP_UPS = 3  # sign-ins in a row that a 403 insufficient_scope may ask for (the spec's retry limit)

_FIELD = r'{}=(?:"([^"]*)"|([^\s,]+))'


def field(header: str | None, name: str) -> str | None:
    """One auth-param of a ``WWW-Authenticate`` value (as the SDK reads it)."""
    if not header:
        return None
    found = re.search(_FIELD.format(re.escape(name)), header)
    return (found.group(1) if found.group(1) is not None else found.group(2)) if found else None


def is_step_up(response: httpx2.Response) -> bool:
    return response.status_code == 403 and field(response.headers.get("www-authenticate"), "error") == \
        "insufficient_scope"


def check(response: httpx2.Response) -> None:
    """Refuse a challenge too big to answer (before the SDK puts its scopes in a URL)."""
    header = response.headers.get("www-authenticate") or ""
    if len(header) > MAX_CHALLENGE:
        raise OAuthFlowError(f"the server's WWW-Authenticate challenge is {len(header)} characters long; "
                             f"at most {MAX_CHALLENGE} are answered, so this sign-in is refused")
    scope = field(header, "scope")
    if scope is not None and len(scope.split()) > MAX_SCOPES:
        raise OAuthFlowError(f"the server asks for {len(scope.split())} scopes; at most {MAX_SCOPES} are "
                             "requested in one sign-in, so this sign-in is refused")


def keep(record: dict[str, Any], response: httpx2.Response) -> None:
    """Note the challenge of a request that only a sign-in can answer (bounded)."""
    header = (response.headers.get("www-authenticate") or "")[:MAX_CHALLENGE + 1]
    record["challenge"] = {"status": response.status_code, "header": header}


def replay(record: dict[str, Any], request: httpx2.Request) -> httpx2.Response | None:
    """The kept challenge as the answer to ``request``, or None when there is none."""
    kept = record.get("challenge")
    if not isinstance(kept, dict) or kept.get("status") not in (401, 403):
        return None
    header = str(kept.get("header") or "")
    return httpx2.Response(int(kept["status"]), headers={"WWW-Authenticate": header} if header else {},
                           request=request)


def check_step_up(record: dict[str, Any], response: httpx2.Response) -> None:
    """A 403 insufficient_scope answered by a new sign-in, unless that cannot help.

    Raises OAuthFlowError when the scopes it names were all granted by the last sign-in (the server
    would refuse again) or after `MAX_STEP_UPS` step-ups in a row.
    """
    wanted = set((field(response.headers.get("www-authenticate"), "scope") or "").split())
    granted = set(str((record.get("tokens") or {}).get("scope") or "").split())
    if wanted and granted and wanted <= granted:
        raise OAuthFlowError(f"the server refuses with insufficient_scope although the last sign-in granted "
                             f"every scope it names ({' '.join(sorted(wanted))}); signing in again would not help")
    if int(record.get("stepUps") or 0) >= MAX_STEP_UPS:
        raise OAuthFlowError(f"the server asked for more scopes {MAX_STEP_UPS} times in a row; no further "
                             "sign-in is started for it (sign out and in to start over)")
