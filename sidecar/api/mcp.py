"""MCP servers: connections declared by toolsets or added by the user (seed 001).

One declaration of a server, `ServerDecl`, with its field list and its bounds (lengths, patterns,
allowed types, env/header/arg limits, timeouts, the sandbox block) written once here. mcpServers/add
takes it as it is (`AddParams`); a toolset.yaml ``mcp_servers[]`` entry is it plus ``tool_output``
(toolsets/manifest.py `McpServerDecl`); the stored row is it plus the toolset it belongs to and its
switches (store/mcp_servers.py `McpServerRow`). So the wire, the manifest and the store cannot drift.

A Struct has one spelling of its keys, and this one's is the wire's (camelCase). toolset.yaml keeps
its snake_case keys: the manifest renames an entry's keys to these before it decodes it, and the
error paths back (`msgspec.structs.fields` gives both spellings of every field), so one decoder
checks both. mcpServers/update's `UpdateParams` are these fields again, each optional (absent:
unchanged): they name the fields a second time (tests/mcp_host/test_declaration.py keeps the two
lists equal) and take their bounds from the aliases below. What bounds cannot say (a stdio server
needs a command, a remote one an http(s) url, what a sandbox may allow) is checked once for all three
in toolsets/manifest.py.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from .base import Empty, Id, MethodSpec, Model
from .debug import SandboxMechanism
from .errors import ErrorCode
from .pages import NextPageToken, PageParams

ServerType = Literal["stdio", "sse", "streamable-http"]
# MCP's log levels (RFC 5424's), least severe first.
LogLevel = Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
# needsAuth: a remote server wants an OAuth sign-in (mcpServers/login); error says why.
# installing: a package runner (npx, uvx, ...) is fetching the server on its first start; install says how far.
ServerStatus = Literal["connecting", "connected", "error", "disabled", "needsAuth", "installing"]


DEFAULT_INSTALL_TIMEOUT = 300.0
"""Seconds a package runner's first start gets to install (npx's first run takes 25-85 s on a fresh machine)."""

_SIZE = "Bytes, or a number with k, m or g as toolset.yaml writes it (\"512m\", \"1g\")"


class ServerSandbox(Model):
    """The OS sandbox of a stdio server, as toolset.yaml's ``mcp_servers[].sandbox`` writes it. Every
    key left out keeps seed 004's default, so ``{}`` is the whole default sandbox. The server reads
    the system's programs and libraries, the sidecar's Python, the folder of its command, the project
    of each argument that names a file (the nearest folder above it holding package.json,
    pyproject.toml, setup.py, node_modules or .git, else its folder) and its working folder (cwd), all
    read-only; never the whole home folder, / or the app's data directory. It
    writes only to a private temporary folder (its TMPDIR and HOME; with bubblewrap a fresh, empty
    /tmp of its own, HOME /tmp/home, gone when it stops) and to the folders in writable. It has no
    network, cannot signal the sidecar (with bubblewrap it sees only its own processes), and the
    user's home folder and the app's data directory are not readable. Its memory and processes count
    for everything it starts together, where debug/info's sandbox.limits is a cgroup (past its
    memory the kernel kills it and it restarts); with rlimit they are not enforced. A server run
    through npx or uvx needs network full (or allowedHosts) to download, and writable for its cache."""

    memory: Annotated[int | str | None, msgspec.Meta(description=(
        f"Memory the server's processes may use together. {_SIZE}; 32m to 64g, default 256m."))] = None
    network: Annotated[Literal["none", "allowedHosts", "full"] | None, msgspec.Meta(description=(
        "none (the default: no connection at all, not even to this machine), allowedHosts (only the hosts "
        "in allowedHosts, through the sidecar's filtering proxy) or full (any host, the local network "
        "included)."))] = None
    allowed_hosts: Annotated[list[str] | None, msgspec.Meta(description=(
        "With network allowedHosts: the hosts the server may reach ('api.example.com', "
        "'api.example.com:443', '*.example.com' for its subdomains). Listing hosts without a network means "
        "allowedHosts."))] = None
    writable: Annotated[list[str] | None, msgspec.Meta(description=(
        "Absolute folders the server may write besides its private /tmp. Refused: relative paths, '/', the "
        "whole home folder, and the app's data directory or a folder holding it."))] = None
    processes: Annotated[int | None, msgspec.Meta(description=(
        "Processes and threads the server may run at once (1-4096, default 64)."))] = None


_SANDBOX_OFF = ("null or absent: the server runs unconfined, as any program of the user's (it reads and "
                "writes what the user can and reaches any host). Only a stdio server can be sandboxed.")


def _d(text: str) -> msgspec.Meta:
    return msgspec.Meta(description=text)


class InstallProgress(Model):
    """How the first start of a server run through a package runner is going: what the runner last
    said on its stderr, while it downloads and installs the server's package."""

    runner: Annotated[str, _d("The package runner the command starts: npx, uvx, pipx, bunx, pnpm or docker.")]
    package: Annotated[str | None, _d("The package (or image) it runs, as the arguments name it.")] = None
    message: Annotated[str | None, _d("The runner's last line on stderr (secrets masked, cut to 300 characters); "
                                      "absent until it writes one.")] = None
    lines: Annotated[int, _d("Lines the runner has written to stderr so far in this attempt.")] = 0
    elapsed_ms: Annotated[int, _d("Milliseconds since this attempt started the runner.")] = 0
    budget_ms: Annotated[int, _d("Milliseconds the install may take before the attempt fails and is retried "
                                 "with backoff (the server's installTimeout).")] = 0
    cache: Annotated[str | None, _d("npx only: the exact folder of the runner's shared install cache "
                                    "(~/.npm/_npx/<hash>) this server uses.")] = None
    note: Annotated[str | None, _d("What was found in that cache before the start: a half-finished install or "
                                   "a stale lock the sidecar's own earlier run left (removed, so npx installs "
                                   "again), or one it did not leave (named, with the folder to remove).")] = None


class McpServer(Model):
    id: Annotated[str, _d("The server key, toolset~server: what mcpServers/* methods take as id.")]
    server_id: Annotated[str, _d("The server's id inside its toolset (mcp_servers[].id, or mcpServers/add's id).")]
    toolset_id: Annotated[str, _d("The toolset that declares it (for mcpServers/add, a userMcp toolset of "
                                  "the same id).")]
    type: Annotated[ServerType, _d("How it is reached: stdio (a process), sse or streamable-http.")]
    status: Annotated[ServerStatus, _d("Its connection now; mcpServers/status announces every change.")]
    enabled: Annotated[bool, _d("Whether it is switched on (mcpServers/setEnabled); off, it is not started.")]
    tool_count: Annotated[int, _d("How many tools it listed when it last connected.")] = 0
    error: Annotated[str | None, _d("What failed, with the last lines of the server's stderr; absent when "
                                    "nothing did.")] = None
    user_mcp: Annotated[bool, _d("Added with mcpServers/add (its toolset holds only this server).")] = False
    command: Annotated[list[str] | None, _d("A stdio server's command line, secrets masked.")] = None
    url: Annotated[str | None, _d("A remote server's URL, secrets (tokens in the query) masked.")] = None
    server_name: Annotated[str | None, _d("The name the server introduced itself with at initialize.")] = None
    requires_confirmation: Annotated[bool, _d("Every call of its tools asks the user first "
                                              "(ui/confirmToolCall).")] = False
    env: Annotated[dict[str, str], msgspec.Meta(
        description="A stdio server's extra environment; secret values masked (****), references "
                    "(${VAR}) and harmless values (LOG_LEVEL) as they are.")] = {}
    headers: Annotated[dict[str, str], msgspec.Meta(
        description="A remote server's HTTP headers, masked as env is.")] = {}
    cwd: Annotated[str | None, msgspec.Meta(description="A stdio server's working folder.")] = None
    env_passthrough: Annotated[list[str], msgspec.Meta(description=(
        "The extra variables of the sidecar's environment it was declared to get (envPassthrough)."))] = []
    env_names: Annotated[list[str], msgspec.Meta(description=(
        "A stdio server: the names of the variables it gets from this machine beyond the basics (PATH, HOME, "
        "LANG...): certificate, proxy and package-manager settings, its envPassthrough, and its own env's "
        "names, sorted; never their values. Read from the sidecar's environment now."))] = []
    warnings: Annotated[list[str], msgspec.Meta(description=(
        "What may stop it from starting as configured (a sandboxed server that cannot read its own "
        "command, script or working folder; a command written as a whole shell line): mcpServers/add, update "
        "and import fill it in; absent when nothing was found, and in other answers."))] = []
    connect_timeout: Annotated[float | None, msgspec.Meta(
        description="Seconds to wait for the server to connect, when set (default 30).")] = None
    call_timeout: Annotated[float | None, msgspec.Meta(
        description="Seconds a tool call may take, when set (default 120).")] = None
    log_level: Annotated[LogLevel | None, msgspec.Meta(
        description="The least severe of the server's log messages passed on as mcpServers/log "
                    "(absent: all it sends).")] = None
    sandbox: Annotated[ServerSandbox | None, msgspec.Meta(description=(
        "The OS sandbox the user turned on for this stdio server, sizes in bytes ({}: seed 004's defaults). "
        "Absent: it runs unconfined."))] = None
    confined_by: Annotated[SandboxMechanism | None, msgspec.Meta(description=(
        "What confines the running server process now: bubblewrap, landlock or seatbelt; 'none' when its "
        "sandbox is on but this machine has no mechanism (it runs unconfined: debug/info's sandbox.warning "
        "says why). Absent while it does not run, and for a server without sandbox."))] = None
    install_timeout: Annotated[float | None, msgspec.Meta(description=(
        f"Seconds a package runner's first start may take to install, when set (default "
        f"{DEFAULT_INSTALL_TIMEOUT:g})."))] = None
    runner: Annotated[str | None, _d("The package runner its command starts (npx, uvx, pipx, bunx, pnpm, "
                                     "docker); absent for a program run directly.")] = None
    install: Annotated[InstallProgress | None, _d("While status is installing: how the install goes. Each "
                                                  "new stderr line of the runner is an mcpServers/status "
                                                  "(at most about four a second).")] = None


MAX_PATH_CHARS = 4096  # PATH_MAX
MAX_ARGS = 1024
MAX_ARG_CHARS = 32 * 1024
MAX_ENV = 1024
MAX_ENV_VALUE_CHARS = 32 * 1024
MAX_HEADERS = 128
MAX_HEADER_VALUE_CHARS = 8 * 1024
MAX_URL_CHARS = 8 * 1024
MAX_CONNECT_TIMEOUT = 600.0
MAX_CALL_TIMEOUT = 3600.0
MAX_INSTALL_TIMEOUT = 3600.0

Command = Annotated[str, msgspec.Meta(max_length=MAX_PATH_CHARS)]
Args = Annotated[list[Annotated[str, msgspec.Meta(max_length=MAX_ARG_CHARS)]], msgspec.Meta(max_length=MAX_ARGS)]
# A variable's name: anything but '=' and NUL (what execve takes), matched whole (see ID_PATTERN).
EnvName = Annotated[str, msgspec.Meta(pattern=r"^[^=\x00]{1,256}(?![\s\S])")]
Env = Annotated[dict[EnvName, Annotated[str, msgspec.Meta(max_length=MAX_ENV_VALUE_CHARS)]],
                msgspec.Meta(max_length=MAX_ENV)]
Cwd = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_PATH_CHARS)]
MAX_PASSTHROUGH = 64
# A variable's name as a program reads it: letters, digits and underscores, not starting with a digit.
PassName = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,255}(?![\s\S])")]
EnvPassthrough = Annotated[list[PassName], msgspec.Meta(max_length=MAX_PASSTHROUGH)]
Url = Annotated[str, msgspec.Meta(max_length=MAX_URL_CHARS)]
# A header's name is an RFC 9110 token; a value holds no line break (it would start another header).
HeaderName = Annotated[str, msgspec.Meta(pattern=r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}(?![\s\S])")]
HeaderValue = Annotated[str, msgspec.Meta(max_length=MAX_HEADER_VALUE_CHARS, pattern=r"^[^\r\n\x00]*(?![\s\S])")]
Headers = Annotated[dict[HeaderName, HeaderValue], msgspec.Meta(max_length=MAX_HEADERS)]
ConnectTimeout = Annotated[float, msgspec.Meta(gt=0, le=MAX_CONNECT_TIMEOUT)]
CallTimeout = Annotated[float, msgspec.Meta(gt=0, le=MAX_CALL_TIMEOUT)]
InstallTimeout = Annotated[float, msgspec.Meta(gt=0, le=MAX_INSTALL_TIMEOUT)]

_SECRETS = (" Values may be ${VAR} references, resolved at connect time: the secrets (secrets/set), then the "
            "environment; a literal secret is moved to the secret store and replaced by one.")


_PASSTHROUGH = (
    "Names of variables of the sidecar's own environment this stdio server also gets, as they are set there "
    f"(at most {MAX_PASSTHROUGH}). Every stdio server already gets the basics (PATH, HOME, LANG...), this "
    "machine's certificate and proxy settings (SSL_CERT_FILE, SSL_CERT_DIR, REQUESTS_CA_BUNDLE, "
    "NODE_EXTRA_CA_CERTS, HTTP(S)_PROXY, NO_PROXY...) and the package managers' (UV_*, npm_config_*, PIP_*, "
    "XDG_*...): list others here. Refused: a model provider's key (OPENAI_API_KEY...), the sidecar's own "
    "SIDECAR_* settings and any name that says it holds a secret (give those in env as \"${NAME}\"). "
    "mcpServers/list's envNames shows what it gets.")


class ServerDecl(Model, kw_only=True):
    """One MCP server as declared: by mcpServers/add, by a toolset.yaml's mcp_servers[] entry (in
    snake_case there) and as stored."""

    id: Annotated[Id, msgspec.Meta(description=(
        "The server's id within its toolset (mcpServers/add: also the id of its userMcp toolset)."))]
    type: Annotated[ServerType, msgspec.Meta(description=(
        "stdio (a program this machine runs), sse or streamable-http (a remote server, by url)."))] = "stdio"
    command: Annotated[Command | None, msgspec.Meta(description=(
        "The program a stdio server runs (a path, or a name found on PATH)."))] = None
    args: Annotated[Args, msgspec.Meta(description="A stdio server's arguments." + _SECRETS)] = []
    env: Annotated[Env, msgspec.Meta(description=(
        "A stdio server's extra environment, over the scrubbed one it gets." + _SECRETS))] = {}
    cwd: Annotated[Cwd | None, msgspec.Meta(description=(
        "A stdio server's working folder (absent: the default)."))] = None
    env_passthrough: Annotated[EnvPassthrough, msgspec.Meta(description=_PASSTHROUGH)] = []
    url: Annotated[Url | None, msgspec.Meta(description=(
        "A remote server's endpoint, http:// or https://." + _SECRETS))] = None
    headers: Annotated[Headers, msgspec.Meta(description=(
        "A remote server's HTTP headers." + _SECRETS))] = {}
    requires_confirmation: Annotated[bool, msgspec.Meta(description=(
        "Its tools ask the user before they run (a tool override still wins)."))] = False
    connect_timeout: Annotated[ConnectTimeout | None, msgspec.Meta(description=(
        f"Seconds it gets to connect, at most {MAX_CONNECT_TIMEOUT:g} (absent: 30)."))] = None
    call_timeout: Annotated[CallTimeout | None, msgspec.Meta(description=(
        f"Seconds one of its tool calls may take, at most {MAX_CALL_TIMEOUT:g} (absent: 120)."))] = None
    log_level: Annotated[LogLevel | None, msgspec.Meta(description=(
        "The least severe log message wanted from it: sent to it with logging/setLevel when it supports that, "
        "and applied to what it sends either way (absent: all it sends)."))] = None
    install_timeout: Annotated[InstallTimeout | None, msgspec.Meta(description=(
        "For a stdio server started through a package runner (npx, uvx, pipx run, bunx, pnpm dlx, docker run): "
        "seconds its first start may take to download and install before the handshake, instead of "
        f"connectTimeout, at most {MAX_INSTALL_TIMEOUT:g} (absent: {DEFAULT_INSTALL_TIMEOUT:g}). Past it the "
        "runner is stopped (SIGTERM, time to clean up) and the start is retried with backoff."))] = None
    sandbox: Annotated[ServerSandbox | None, msgspec.Meta(description=(
        "Run this stdio server in the OS sandbox: {} for seed 004's defaults (no network, 256m, 64 "
        "processes, writes nowhere but a private /tmp), or the settings to change. " + _SANDBOX_OFF))] = None


class AddParams(ServerDecl, kw_only=True):
    """mcpServers/add: the server to add (a toolset.yaml mcp_servers[] entry takes these fields, in snake_case)."""


_UNCHANGED = " Left out: unchanged."
_KEEP_MASKED = (" A value sent back exactly as mcpServers/list shows it (masked, ****) keeps the value "
                "it stands for; any other **** is refused.")


class UpdateParams(Model):
    """mcpServers/update: the fields of mcpServers/add to change (with the same bounds), and enabled."""

    id: Annotated[str, msgspec.Meta(
        description="Server key (toolset~server); a bare server id works when it names one server.")]
    type: Annotated[ServerType | msgspec.UnsetType, msgspec.Meta(
        description="stdio, sse or streamable-http (give command or url to match)." + _UNCHANGED)] = msgspec.UNSET
    command: Annotated[Command | None | msgspec.UnsetType, msgspec.Meta(
        description="The program a stdio server runs." + _UNCHANGED)] = msgspec.UNSET
    args: Annotated[Args | msgspec.UnsetType, msgspec.Meta(
        description="The whole new argument list." + _KEEP_MASKED + _UNCHANGED)] = msgspec.UNSET
    env: Annotated[Env | msgspec.UnsetType, msgspec.Meta(
        description="The whole new environment; a literal secret goes to the secret store as "
                    "mcpServers/add does it." + _KEEP_MASKED + _UNCHANGED)] = msgspec.UNSET
    cwd: Annotated[Cwd | None | msgspec.UnsetType, msgspec.Meta(
        description="Working folder (null: the default)." + _UNCHANGED)] = msgspec.UNSET
    env_passthrough: Annotated[EnvPassthrough | msgspec.UnsetType, msgspec.Meta(
        description="The whole new list of variables passed through from the sidecar's environment ([]: "
                    "none beyond the allow-list)." + _UNCHANGED)] = msgspec.UNSET
    url: Annotated[Url | None | msgspec.UnsetType, msgspec.Meta(
        description="Endpoint of a remote server." + _KEEP_MASKED + _UNCHANGED)] = msgspec.UNSET
    headers: Annotated[Headers | msgspec.UnsetType, msgspec.Meta(
        description="The whole new set of HTTP headers." + _KEEP_MASKED + _UNCHANGED)] = msgspec.UNSET
    requires_confirmation: Annotated[bool | msgspec.UnsetType, msgspec.Meta(
        description="Whether its tools ask before they run (a tool override still wins)." + _UNCHANGED
    )] = msgspec.UNSET
    connect_timeout: Annotated[ConnectTimeout | None | msgspec.UnsetType, msgspec.Meta(
        description=f"Seconds, at most {MAX_CONNECT_TIMEOUT:g} (null: the default, 30)." + _UNCHANGED
    )] = msgspec.UNSET
    call_timeout: Annotated[CallTimeout | None | msgspec.UnsetType, msgspec.Meta(
        description=f"Seconds, at most {MAX_CALL_TIMEOUT:g} (null: the default, 120)." + _UNCHANGED
    )] = msgspec.UNSET
    log_level: Annotated[LogLevel | None | msgspec.UnsetType, msgspec.Meta(
        description="The least severe log message wanted from it (null: all it sends)." + _UNCHANGED
    )] = msgspec.UNSET
    install_timeout: Annotated[InstallTimeout | None | msgspec.UnsetType, msgspec.Meta(
        description=f"Seconds a package runner's first start may install, at most {MAX_INSTALL_TIMEOUT:g} "
                    f"(null: the default, {DEFAULT_INSTALL_TIMEOUT:g})." + _UNCHANGED
    )] = msgspec.UNSET
    enabled: Annotated[bool | msgspec.UnsetType, msgspec.Meta(
        description="Connect (true) or disconnect and stop (false), as mcpServers/setEnabled." + _UNCHANGED
    )] = msgspec.UNSET
    sandbox: Annotated[ServerSandbox | None | msgspec.UnsetType, msgspec.Meta(description=(
        "The whole new sandbox of a stdio server ({}: seed 004's defaults); null turns it off (the server "
        "runs unconfined). A change restarts the server." + _UNCHANGED))] = msgspec.UNSET


class ServerResult(Model):
    server: Annotated[McpServer, msgspec.Meta(description=(
        "The server as it is now (its status may still change: mcpServers/status says)."))]


class ListServersParams(PageParams, kw_only=True):
    """A page of servers, by toolset id and then in the order their toolset declares them."""


class ServersResult(Model):
    servers: Annotated[list[McpServer], msgspec.Meta(description=(
        "By toolset id, then in the order the toolset declares them (a server added with mcpServers/add "
        "has a toolset of its own)."))]
    next_page_token: NextPageToken = None


class ServerIdParams(Model):
    id: Annotated[str, msgspec.Meta(description=(
        "The server's key (toolset~server); a bare server id works when exactly one server has it."))]


TokenEndpointAuthMethod = Literal["none", "client_secret_basic", "client_secret_post", "private_key_jwt"]
SigningAlgorithm = Literal["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512"]
_CLIENT_TEXT = Annotated[str, msgspec.Meta(min_length=1, max_length=1024, pattern=r"^[^\x00-\x1f]*(?![\s\S])")]
_PEM = Annotated[str, msgspec.Meta(min_length=1, max_length=16 * 1024)]


class OAuthClient(Model):
    """A client the user registered with the server's authorization server ahead of time (its
    client id, and its secret or private key): used instead of a client ID metadata document or
    dynamic registration. Kept with the sign-in in the secret store, never in the database; no
    response, log line or error shows the secret or the key. Sent again, it replaces the one kept."""

    client_id: Annotated[_CLIENT_TEXT, msgspec.Meta(description="The client id the authorization server issued.")]
    client_secret: Annotated[_CLIENT_TEXT | None, msgspec.Meta(description=(
        "The client secret, for client_secret_basic or client_secret_post (absent: a public client)."))] = None
    private_key: Annotated[_PEM | None, msgspec.Meta(description=(
        "A PEM private key that signs the client's assertion (private_key_jwt, RFC 7523); its client is "
        "registered with the matching public key."))] = None
    signing_algorithm: Annotated[SigningAlgorithm | None, msgspec.Meta(description=(
        "The JWS algorithm of privateKey's assertions (absent: ES256 for an EC key, RS256 otherwise)."))] = None
    token_endpoint_auth_method: Annotated[TokenEndpointAuthMethod | None, msgspec.Meta(description=(
        "How the client authenticates at the token endpoint (absent: private_key_jwt with privateKey; "
        "with clientSecret the first of client_secret_basic and client_secret_post the authorization "
        "server lists, basic when it lists neither; none without either)."))] = None
    grant: Annotated[Literal["authorization_code", "client_credentials"], msgspec.Meta(description=(
        "authorization_code (the default: the user signs in in the browser) or client_credentials (a "
        "machine client: no browser, the sidecar gets and renews tokens by itself; needs clientSecret or "
        "privateKey)."))] = "authorization_code"
    scope: Annotated[Annotated[str, msgspec.Meta(max_length=4096)] | None, msgspec.Meta(description=(
        "Scopes to ask for with client_credentials (absent: what the server's challenge or metadata "
        "names). The authorization_code grant always asks for what the server names."))] = None


class LoginParams(Model):
    id: Annotated[str, msgspec.Meta(description=(
        "Server key (toolset~server); a bare server id works when it names one server."))]
    client: Annotated[OAuthClient | None, msgspec.Meta(description=(
        "A pre-registered client to sign in with (kept for later sign-ins and token refreshes). Absent: "
        "the one given before, else the app's client ID metadata document where the authorization server "
        "supports one, else dynamic client registration."))] = None


class OpenUrlParams(Model):
    url: Annotated[str, msgspec.Meta(description="The page to open in the user's browser (an OAuth "
                                     "authorization page); it ends by redirecting to the sidecar's loopback listener.")]
    reason: Annotated[str, msgspec.Meta(description="Why, in words for the user.")]
    server: Annotated[str | None, msgspec.Meta(description="The MCP server key (toolset~server) it is for.")] = None


class OpenUrlResult(Model):
    opened: Annotated[bool, msgspec.Meta(description="False: the page was not opened; the sign-in fails.")]


class ServerSetEnabledParams(Model):
    id: Annotated[str, msgspec.Meta(description="The server's key (toolset~server), or a bare id naming one server.")]
    enabled: Annotated[bool, msgspec.Meta(description=(
        "true: connect it (and keep it connected); false: disconnect and stop it, stored across restarts."))]


class ServerStatusParams(Model):
    server: Annotated[McpServer, msgspec.Meta(description=(
        "The whole server after the change (status, error, install progress, tool count), as mcpServers/list "
        "shows it."))]


class ServerLogParams(Model):
    server: Annotated[str, msgspec.Meta(description="The logging server's key (toolset~server).")]
    level: Annotated[LogLevel, msgspec.Meta(description="The message's level, as the server gave it.")]
    data: Annotated[Any, msgspec.Meta(
        description="What the server logged (any JSON), secrets masked, cut to 8,192 characters.")] = None
    logger: Annotated[str | None, msgspec.Meta(description="The server's name for the logger, if any.")] = None
    dropped: Annotated[int, msgspec.Meta(
        description="Messages of this server dropped before this one because it logged faster than "
                    "20 a second (after a burst of 100).")] = 0


class ResourcesResult(Model):
    resources: Annotated[list[dict[str, Any]], msgspec.Meta(description=(
        "Every resource the server lists (all pages), each as MCP gives it: uri, name, and optionally title, "
        "description, mimeType, size."))]


class ReadResourceParams(Model):
    id: Annotated[str, msgspec.Meta(description="The server's key (toolset~server), or a bare id naming one server.")]
    uri: Annotated[str, msgspec.Meta(description="The resource's URI, as mcpServers/resources listed it.")]


class ReadResourceResult(Model):
    contents: Annotated[list[dict[str, Any]], msgspec.Meta(description=(
        "The resource's contents as MCP gives them: each item has uri, optionally mimeType, and either text "
        "or blob (base64)."))]


class PromptsResult(Model):
    prompts: Annotated[list[dict[str, Any]], msgspec.Meta(description=(
        "Every prompt the server offers (all pages), as MCP gives it: name, and optionally title, description "
        "and arguments (each with name, description, required)."))]


class GetPromptParams(Model):
    id: Annotated[str, msgspec.Meta(description="The server's key (toolset~server), or a bare id naming one server.")]
    name: Annotated[str, msgspec.Meta(description="The prompt's name, as mcpServers/prompts listed it.")]
    arguments: Annotated[dict[str, str], msgspec.Meta(description=(
        "The prompt's arguments by name, each a string (the server checks which are required)."))] = {}


class GetPromptResult(Model):
    messages: Annotated[list[dict[str, Any]], msgspec.Meta(description=(
        "The filled-in prompt as MCP gives it: messages with role (user or assistant) and content (text, image, "
        "audio or an embedded resource)."))]
    description: Annotated[str | None, msgspec.Meta(description="The server's description of the prompt; null when it "
                                                                "gave none.")] = None


class ElicitParams(Model):
    server: Annotated[str, msgspec.Meta(description="The asking server's key (toolset~server).")]
    message: Annotated[str, msgspec.Meta(description="What the server says to the user.")]
    mode: Annotated[Literal["form", "url"], msgspec.Meta(
        description="form: fill in requestedSchema and answer with content. url: offer to open url "
                    "(nothing comes back through the sidecar; accept means the user agreed to open it).")]
    requested_schema: Annotated[dict[str, Any] | None, msgspec.Meta(
        description="form mode: the flat JSON Schema the answer's content must fit; an accepted answer "
                    "that does not fit fails the tool call (the server is told cancel).")] = None
    url: Annotated[str | None, msgspec.Meta(description="url mode: the page the user is asked to open.")] = None
    elicitation_id: Annotated[str | None, msgspec.Meta(
        description="url mode: the server's id of this elicitation, opaque.")] = None
    chat_id: Annotated[str | None, msgspec.Meta(
        description="The chat the asking server works for: the chat of the requests in flight on it "
                    "(absent when there are none, or they belong to several chats).")] = None
    tool_call_id: Annotated[str | None, msgspec.Meta(
        description="The tool call the question belongs to: the one call in flight on that server "
                    "when it asked (absent when there is none, or several).")] = None


class ElicitResult(Model):
    action: Annotated[Literal["accept", "decline", "cancel"], msgspec.Meta(description=(
        "accept: the user answered (content holds it); decline: the user said no; cancel: the user dismissed "
        "the question without choosing."))]
    content: Annotated[dict[str, Any] | None, msgspec.Meta(description=(
        "With accept: the answer, an object matching the question's requestedSchema (flat: strings, numbers, "
        "booleans, enums); null otherwise."))] = None


ImportSource = Literal["claude", "claudeCode", "vscode", "cursor", "windsurf", "zed", "goose"]


class McpImportPreviewParams(Model):
    path: Annotated[str | None, msgspec.Meta(description=(
        "An absolute path to one app's config: Claude Desktop's claude_desktop_config.json, Claude Code's "
        "~/.claude.json or a project's .mcp.json, VS Code's mcp.json (user, or a workspace's .vscode/mcp.json), "
        "Cursor's mcp.json (~/.cursor or a project's .cursor), Windsurf's mcp_config.json, Zed's settings.json "
        "(context_servers) or goose's config.yaml (extensions); JSON with comments and trailing commas is "
        "read, at most 1 MiB (16 MiB for ~/.claude.json). Absent: every app's usual file on this machine, "
        "and the .mcp.json of each project Claude Code knows."))] = None
    project: Annotated[str | None, msgspec.Meta(description=(
        "An absolute path to a project folder whose own configs are read too (.mcp.json, .vscode/mcp.json, "
        ".cursor/mcp.json, .zed/settings.json): its ${workspaceFolder}, and the folder its servers start in."))] = None


class SecretInput(Model):
    name: Annotated[str, msgspec.Meta(description=(
        "The secret that stands in for the value (the server refers to it as ${name}): store it with secrets/set."))]
    prompt_id: Annotated[str, msgspec.Meta(description=(
        "What the app called it: VS Code's input id (${input:id}), or the file Windsurf read (${file:path})."))]
    description: Annotated[str | None, msgspec.Meta(description="The app's words for it, to show when asking.")] = None
    password: Annotated[bool, msgspec.Meta(description="The app hid it as typed: ask for it masked.")] = False


class FoundServer(Model):
    id: Annotated[str, msgspec.Meta(description=(
        "The id it would be imported under: its name in the app, made a valid id, or renamed when another "
        "file found has a different server by that name (its warnings say so)."))]
    source: Annotated[ImportSource, msgspec.Meta(description=(
        "The app: claude (Claude Desktop), claudeCode, vscode, cursor, windsurf, zed or goose."))]
    path: Annotated[str, msgspec.Meta(description="The file it came from.")]
    type: Annotated[ServerType, msgspec.Meta(description="How it is reached, in mcpServers/add's words.")]
    command: Annotated[list[str] | None, msgspec.Meta(description=(
        "A stdio server's program and arguments as it will run them (the app's variables filled in, a "
        "shell line split), secrets masked."))] = None
    url: Annotated[str | None, msgspec.Meta(description="A remote server's URL, secrets masked.")] = None
    env_keys: Annotated[list[str], msgspec.Meta(description=(
        "The names of the environment variables it sets (values not shown: secrets among them go to the "
        "secret store on import)."))] = []
    enabled: Annotated[bool, msgspec.Meta(description=(
        "False: turned off in that app; imported turned off (mcpServers/setEnabled turns it on).")) ] = True
    project: Annotated[str | None, msgspec.Meta(description=(
        "The project folder it belongs to (a project's config, or Claude Code's per-project servers): its "
        "working folder unless the entry gives one.")) ] = None
    exists: Annotated[bool, msgspec.Meta(description=(
        "A server or toolset with this id is installed already (see suggestedId and mcpServers/import's "
        "onConflict)."))] = False
    suggested_id: Annotated[str | None, msgspec.Meta(
        description="When exists: a free id to import it under instead (mcpServers/import's rename).")] = None
    unset_variables: Annotated[list[str], msgspec.Meta(
        description="The ${NAME}s it refers to (VS Code's ${input:x} prompts become one) that neither "
                    "the secret store nor the environment has: ask the user for each (secrets/set); until "
                    "then the server waits in error.")] = []
    inputs: Annotated[list[SecretInput], msgspec.Meta(description=(
        "Values the app asked its user for or read from a file, each now a secret to set with secrets/set "
        "(unsetVariables says which are still missing)."))] = []
    warnings: Annotated[list[str], msgspec.Meta(description=(
        "What changed on the way (a shell line split into command and args, a relative command made absolute, a "
        "rename, a default used for an unset variable) and what will need the user."))] = []


class SkippedServer(Model):
    id: Annotated[str, msgspec.Meta(description="The previewed id (importPreview: the entry's name in the file).")]
    reason: Annotated[str, msgspec.Meta(description="Why it was not added, and how to add it.")]
    path: Annotated[str | None, msgspec.Meta(description="importPreview: the file the entry is in.")] = None


class McpImportPreviewResult(Model):
    servers: Annotated[list[FoundServer], msgspec.Meta(description=(
        "The servers found, one per id (the same server in two files once, a different one by the same "
        "name renamed)."))]
    skipped: Annotated[list[SkippedServer], msgspec.Meta(description=(
        "Entries that cannot be imported, each with why (no command, a shell line only a shell can run, a "
        "relative command with no project, an unknown type, an app's built-in extension)."))] = []
    warnings: Annotated[list[str], msgspec.Meta(description=(
        "Files found that could not be read (too big, not JSON, ...); the other files' servers are still "
        "offered."))] = []


class McpImportParams(Model):
    ids: Annotated[list[str], msgspec.Meta(description=(
        "Which of the previewed servers to add, by their previewed id (the same path and project read again)."))]
    path: Annotated[str | None, msgspec.Meta(description="As given to mcpServers/importPreview.")] = None
    project: Annotated[str | None, msgspec.Meta(description="As given to mcpServers/importPreview.")] = None
    rename: Annotated[dict[str, Id], msgspec.Meta(
        description="Previewed id -> the id to add that server under (for one whose id is taken).")] = {}
    on_conflict: Annotated[Literal["rename", "skip", "fail"], msgspec.Meta(
        description="A picked server whose id is taken and that is not renamed: rename (added under its "
                    "suggestedId, result.renamed says so; one that runs the same command or URL as the installed "
                    "server is the same server and is skipped), skip it (result.skipped names it), or fail (the "
                    "whole import is refused before anything is added; the error names each such id). One clash "
                    "never stops the others but with fail.")] = "rename"
    install_timeout: Annotated[InstallTimeout | None, msgspec.Meta(description=(
        "installTimeout for each imported server started through a package runner (npx, uvx, ...): seconds "
        f"its first start may take to install, at most {MAX_INSTALL_TIMEOUT:g} (absent: "
        f"{DEFAULT_INSTALL_TIMEOUT:g}). Servers run directly do not take it."))] = None


class McpImportResult(Model):
    servers: Annotated[list[McpServer], msgspec.Meta(description=(
        "The servers added, connecting in the background (or disabled, when turned off in their app)."))]
    skipped: Annotated[list[SkippedServer], msgspec.Meta(
        description="Picked servers left out, each with why (its id is taken, it is installed already, or it "
                    "was added meanwhile by another request).")] = []
    renamed: Annotated[dict[str, str], msgspec.Meta(description=(
        "Previewed id -> the id it was added under, for those renamed because their id was taken."))] = {}


_NF, _CF, _IP, _ST, _UP, _TO = (ErrorCode.NOT_FOUND, ErrorCode.CONFLICT, ErrorCode.INVALID_PARAMS,
                                ErrorCode.STORAGE_ERROR, ErrorCode.UPSTREAM_ERROR, ErrorCode.TIMEOUT)

SPECS = (
    MethodSpec("mcpServers/add", "clientToServer", "request",
               "Add a standalone MCP server: creates a userMcp toolset whose id is the server id and "
               "connects in the background (mcpServers/status reports how it goes).",
               params=AddParams, result=ServerResult, errors=(_IP, _CF, _ST)),
    MethodSpec("mcpServers/list", "clientToServer", "request",
               "Configured MCP servers with their connection status, a page at a time (pageSize, pageToken).",
               params=ListServersParams, result=ServersResult, errors=(_IP, _ST)),
    MethodSpec("mcpServers/update", "clientToServer", "request",
               "Change a server in place: its overrides, its toolset and its stored secrets stay. It "
               "reconnects only when what the connection depends on changed (command, args, env, cwd, "
               "url, headers, type, timeouts, sandbox, enabled). A server a toolset declares takes only enabled "
               "(its manifest says how it runs: edit the toolset and import it with replace).",
               params=UpdateParams, result=ServerResult, errors=(_IP, _NF, _CF, _ST)),
    MethodSpec("mcpServers/remove", "clientToServer", "request",
               "Remove a server added with mcpServers/add (with its toolset and overrides); servers "
               "a toolset declares go with toolsets/uninstall.",
               params=ServerIdParams, result=Empty, errors=(_NF, _CF, _ST)),
    MethodSpec("mcpServers/setEnabled", "clientToServer", "request",
               "Connect (true) or disconnect and stop (false) one server.",
               params=ServerSetEnabledParams, result=ServerResult, errors=(_NF, _ST)),
    MethodSpec("mcpServers/reconnect", "clientToServer", "request",
               "Drop the connection and connect again now (after fixing its environment, say).",
               params=ServerIdParams, result=ServerResult, errors=(_NF, _CF)),
    MethodSpec("mcpServers/login", "clientToServer", "request",
               "Sign in to a remote server with OAuth: the sidecar asks the UI to open the authorization page "
               "(ui/openUrl), takes the redirect on a 127.0.0.1 listener, keeps the tokens in the secret store, "
               "and answers once the server is connected again (or failed). With a client whose grant is "
               "client_credentials no page is opened: the sidecar gets the token itself. Errors: UpstreamError "
               "(source oauth) for a refused sign-in, Timeout when the user or an endpoint took too long, "
               "InvalidParams for a client that cannot sign in (client_credentials without a secret or key).",
               params=LoginParams, result=ServerResult, errors=(_NF, _CF, _IP, _UP, _TO, _ST)),
    MethodSpec("mcpServers/logout", "clientToServer", "request",
               "Sign out of a server: its OAuth tokens are revoked where the authorization server has a "
               "revocation endpoint, and forgotten with the client registration; it reconnects and then "
               "needs a sign-in.",
               params=ServerIdParams, result=ServerResult, errors=(_NF, _ST)),
    MethodSpec("ui/openUrl", "serverToClient", "request",
               "Open a page in the user's browser (an MCP server's OAuth sign-in); answer once it is opened.",
               params=OpenUrlParams, result=OpenUrlResult),
    MethodSpec("mcpServers/prepare", "clientToServer", "request",
               "Warm a server's package ahead of use: a server started through a package runner (npx, uvx, "
               "...) is started once with its install budget (status installing, with progress, as on a first "
               "connect) and answers when its handshake is done. An enabled server stays connected; a disabled "
               "one is stopped again, its package now in the runner's cache. A server run directly just "
               "connects. Errors: UpstreamError when the install or the handshake failed (data.message says "
               "why), Timeout past its installTimeout.",
               params=ServerIdParams, result=ServerResult, errors=(_NF, _CF, _UP, _TO)),
    MethodSpec("mcpServers/status", "serverToClient", "notification",
               "A server's status changed (connecting, installing, connected, error, disabled, needsAuth), "
               "its install progressed, or its tools changed.",
               params=ServerStatusParams),
    MethodSpec("mcpServers/log", "serverToClient", "notification",
               "A server logged a message (MCP notifications/message) at or above its logLevel; "
               "rate-limited per server, with a count of what was dropped.",
               params=ServerLogParams),
    MethodSpec("mcpServers/resources", "clientToServer", "request", "The resources a connected server offers.",
               params=ServerIdParams, result=ResourcesResult, errors=(_NF, _CF, _UP, _TO)),
    MethodSpec("mcpServers/readResource", "clientToServer", "request", "Read one resource of a server.",
               params=ReadResourceParams, result=ReadResourceResult, errors=(_NF, _CF, _UP, _TO)),
    MethodSpec("mcpServers/prompts", "clientToServer", "request", "The prompts a connected server offers.",
               params=ServerIdParams, result=PromptsResult, errors=(_NF, _CF, _UP, _TO)),
    MethodSpec("mcpServers/getPrompt", "clientToServer", "request", "Fill in one prompt of a server.",
               params=GetPromptParams, result=GetPromptResult, errors=(_NF, _CF, _UP, _TO)),
    MethodSpec("ui/elicit", "serverToClient", "request",
               "An MCP server asks the user for input (MCP elicitation); the answer goes back to it.",
               params=ElicitParams, result=ElicitResult),
    MethodSpec("mcpServers/importPreview", "clientToServer", "request",
               "Read the MCP servers configured in Claude Desktop, Claude Code, VS Code, Cursor, Windsurf, Zed "
               "or goose (one file, or every app's usual file) and show what importing them would add, with each "
               "app's variables filled in and the secrets the user will be asked for; adds nothing.",
               params=McpImportPreviewParams, result=McpImportPreviewResult, errors=(_IP, _NF)),
    MethodSpec("mcpServers/import", "clientToServer", "request",
               "Add the servers picked from mcpServers/importPreview (each as mcpServers/add would); one "
               "whose id is taken is renamed (rename, or onConflict rename), skipped (onConflict skip, or the same "
               "server installed already) or refuses the import before anything is added (onConflict fail). "
               "Imports run one at a time, so two of one file add each server once.",
               params=McpImportParams, result=McpImportResult, errors=(_IP, _NF, _CF, _ST)),
)
