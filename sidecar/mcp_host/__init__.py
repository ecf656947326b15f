"""MCP connections and their supervision.

The sidecar passes server configs in and gets states, tools and results out; this package knows
nothing of JSON-RPC envelopes toward the UI or of the database. Importing it is cheap: the `mcp` SDK
(over half a second to import) is loaded in a worker thread on the first connection.

API::

    from sidecar.mcp_host import McpHost, ServerConfig, ServerState, McpTool, McpError

    host = McpHost(
        on_status=async (ServerState) -> None,         # every change of a server's state
        on_tools_changed=async (key: str) -> None,     # after tools were re-listed on list_changed
        elicit=async (Elicitation) -> ElicitAnswer,     # elicitation/create (form or URL mode)
        max_result_bytes=32 << 20,
        vault=SecretStore,                              # OAuth sign-ins (signin.py); None: no OAuth
        open_url=async (key, url, reason) -> bool,      # ui/openUrl, for the browser step of a sign-in
        client_metadata_url=None,                       # the app's client ID metadata document (HTTPS)
    )
    host.bind(task_group)                # the sidecar's task group: supervisors live there
    await host.sync(configs)             # desired set; returns at once (connects in the background)
    host.states() -> list[ServerState];  host.state(key) -> ServerState  (KeyError if unknown)
    host.tools(key) -> list[McpTool]     # [] unless connected
    await host.reconnect(key)            # immediate attempt (drops the current connection)
    await host.login(key)                # OAuth sign-in (the browser through `open_url`), then reconnect
    await host.call_tool(key, name, args, *, timeout=None, on_progress=None, origin=None) -> dict
        # {"content": [MCP content JSON...], "structuredContent"?: ..., "isError": bool}
    await host.list_resources(key) -> list[dict];   await host.read_resource(key, uri) -> dict
    await host.list_prompts(key) -> list[dict];     await host.get_prompt(key, name, args) -> dict
    await host.aclose()                  # stop everything; returns when the children are gone

Requests raise `McpError(kind, message, server=key)`, kind one of ``not_connected``, ``timeout``, ``server``
(a JSON-RPC error from the server, `server_code`/`server_data` kept; or an invalid answer), ``disconnected``,
``too_large``, ``elicitation``. Cancelling the awaiting task sends ``notifications/cancelled`` to the server (the
SDK's dispatcher does it, shielded and bounded) and re-raises. A call's timeout (`timeout` or the
server's `call_timeout`) cancels the request the same way; it stands still while the server is
waiting for the user on an elicitation.

Elicitation (`elicitation`): an `Elicitation` carries the mode (``form`` with its schema, ``url``
with the URL and the server's elicitation id) and the `CallOrigin` (chat, tool call) of the
request in flight on that server when it asked. An accepted form answer that does not fit the
schema, or an `elicit` callback raising `InvalidAnswer`, sends the server ``cancel`` and fails that
request with kind ``elicitation``.

Behaviour:
- `sync` keys servers by `ServerConfig.key` ("toolset~server"): new or enabled ones start
  connecting, removed or disabled ones stop, changed ones restart (the old instance is fully stopped
  before the new one starts), equal ones are left alone.
- States: ``connecting`` (first attempt, or after `reconnect`) -> ``connected`` | ``error`` |
  ``needsAuth``; ``disabled``. `on_status` fires only when a snapshot actually changes, and once after every
  re-listing of tools. `error` says what went wrong, for stdio servers with the last lines of the
  child's stderr.
- `${VAR}` in env values, args, command, cwd, url and header values are resolved at each connect
  from the `variables` lookup the host is given (the sidecar's: the user's secrets, then the process
  environment); a missing one is an `error` state naming it, retried when `variable_changed` says
  that variable was set (or on `sync`/`reconnect`).
- OAuth (remote servers without their own Authorization header, when the host has a vault): a
  401 with nothing to refresh is the status ``needsAuth`` with the reason, never a browser; `login`
  does the sign-in (`oauth.py` over the SDK's OAuthClientProvider, `loopback.py` for the redirect,
  `signin.py` for what is kept). Tokens are refreshed before expiry and once on a 401.
- Supervision: every failure (first connect or a lost connection) is retried with exponential backoff
  from 0.5 s doubling to 30 s (reset after a connection that lasted a minute); during the wait the
  state stays `error` with the message. Pending requests on a lost connection fail ``disconnected``.
- Handshake: the legacy `initialize` handshake (npm servers and ours both speak it; the SDK's
  'auto' mode probes `server/discover`, which older servers answer with garbage or not at all),
  bounded by `connect_timeout`. Tools are listed after it (paginated) and re-listed on
  ``notifications/tools/list_changed``.
- stdio children (`stdio.StdioTransport`): own process group; environment = `scrubbed_env()` with this
  machine's certificate, proxy and package-manager settings (`secrets/inherited.py`), the server's
  envPassthrough names, then the server's env; stderr read continuously (last 40 lines kept); stop =
  close stdin, 1 s, SIGTERM to the group, 1 s, SIGKILL to the group. A command not on PATH is looked
  up on the user's login-shell PATH.
- Results over `max_result_bytes` fail ``too_large``: stdio lines over the cap are skipped while
  being read; HTTP answers are checked after parsing (their event cap is twice the limit).

Modules: `config` (ServerConfig, `${VAR}`), `host` (the McpHost facade), `state` (what the host
knows of each server), `supervise` (backoff and restarts), `connect` (one attempt) and `session`
(the SDK session over a transport), `requests` (calls, resources, prompts, timeouts), `failures`
(failure wording), `elicitation`, `stdio` and `remote` (transports), `commands` (PATH and
login-shell lookup), `oauth`, `oauth_guard`, `loopback` and `signin` (OAuth sign-in), `servers` (the MCP-server
service over the store and the host). `session`, `requests`, `stdio`, `remote` and `oauth` import
the SDK: they are imported lazily.
"""

from ..errors import McpError
from ..secrets import MissingVariable
from .config import ServerConfig
from .elicitation import ElicitAnswer, Elicitation, InvalidAnswer
from .host import McpHost
from .state import CallOrigin, McpTool, ServerState

__all__ = ["CallOrigin", "ElicitAnswer", "Elicitation", "InvalidAnswer", "McpError", "McpHost", "McpTool",
           "MissingVariable", "ServerConfig", "ServerState"]
