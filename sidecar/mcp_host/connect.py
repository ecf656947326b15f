"""One connection attempt: load the SDK, resolve the config, open the transport and serve until lost.

Cheap to import: the SDK-bound half (the session over a transport) is `session.py`, imported once
the SDK has been loaded in a worker thread.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from ..children import scrubbed_env
from ..errors import Conflict, SignInFailed, StorageError
from ..process import freeze_heap
from ..sandbox.runner import Sandbox
from ..secrets import MissingVariable, references_in, resolve, resolve_mapping, secret_values
from ..secrets.known import remember_all
from . import runners, signin
from .commands import CommandNotFound, resolve_command
from .config import ServerConfig
from .elicitation import Elicit, ElicitAnswer, Elicitation
from .failures import Failure, describe, flatten, only_cancelled
from .install import TERM_GRACE, Install
from .logs import OnLog
from .npx_cache import Journal
from .signin import OpenUrl, Vault
from .state import Conn, LiveServer
from .stdio import StdioTransport, Streams

if TYPE_CHECKING:  # the SDK is imported in a worker thread on first connect, never at start-up
    import httpx2

log = logging.getLogger("sidecar.mcp_host")

OnToolsChanged = Callable[[str], Awaitable[None]]
# What `${VAR}` resolves against, given the names a config refers to: the sidecar passes its secret
# store's (the user's secrets, then the process environment).
Variables = Callable[[Iterable[str]], Awaitable[Mapping[str, str]]]


async def process_environment(_names: Iterable[str]) -> Mapping[str, str]:
    """Variables for a host without a secret store (tests, benches): the process environment."""
    return os.environ


def config_references(config: ServerConfig) -> set[str]:
    """Every variable a server's config refers to (command, args, env, cwd, url, headers)."""
    return references_in([config.command, *config.args, *config.env.values(), config.cwd, config.url,
                          *config.headers.values()])


def uses_oauth(config: ServerConfig) -> bool:
    """A remote server signs in with OAuth unless its config sends its own Authorization header."""
    return config.type != "stdio" and not any(k.lower() == "authorization" for k in config.headers)

_sdk_loaded = False


def _import_sdk() -> None:
    """Runs in a worker thread: the SDK takes more than half a second to import."""
    import jsonschema  # noqa: F401  (elicitation answers are checked with it)
    import mcp.client.session  # noqa: F401
    import mcp.client.streamable_http  # noqa: F401
    import mcp.shared.exceptions  # noqa: F401
    import mcp_types  # noqa: F401

    from . import oauth, remote, requests, session, stdio  # noqa: F401


@dataclass
class Spec:
    """A config with its `${VAR}`s resolved and its command found."""

    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)


async def prepare(config: ServerConfig, variables: Variables = process_environment) -> Spec:
    try:
        found_vars = await variables(config_references(config))
    except StorageError as exc:  # the keystore is locked or gone: retried with backoff, and when a secret is set
        raise Failure(exc.message) from None
    try:
        if config.type == "stdio":
            if not config.command:
                raise Failure("no command is set for this stdio server", permanent=True)
            command = resolve(config.command, found_vars)
            args = [resolve(a, found_vars) for a in config.args]
            resolved_env = resolve_mapping(config.env, found_vars)
            remember_all(secret_values(env=resolved_env, args=args))
            # This machine's certificate, proxy and package-manager settings: what `npx -y` and `uvx`
            # need to install a server at all behind a company CA or proxy (secrets/inherited.py).
            env = scrubbed_env(resolved_env, package_runners=True, passthrough=config.env_passthrough)
            cwd = resolve(config.cwd, found_vars) if config.cwd else None
            if cwd is not None and not await anyio.Path(cwd).is_dir():
                raise Failure(f"the working directory {cwd} does not exist", permanent=True)
            try:
                found = await resolve_command(command, env.get("PATH") or os.defpath, cwd)
            except CommandNotFound as exc:
                raise Failure(str(exc)) from None
            env["PATH"] = found.child_path
            return Spec(argv=[found.path, *args], env=env, cwd=cwd)
        if not config.url:
            raise Failure(f"no URL is set for this {config.type} server", permanent=True)
        url = resolve(config.url, found_vars)
        if not url.lower().startswith(("http://", "https://")):
            raise Failure("the URL must start with http:// or https://", permanent=True)
        headers = resolve_mapping(config.headers, found_vars)
        remember_all(secret_values(headers=headers, url=url))
        return Spec(url=url, headers=headers)
    except MissingVariable as exc:
        raise Failure(str(exc), permanent=True) from None


class Connector:
    """Makes connection attempts for the supervisor, with what every connection shares."""

    def __init__(self, *, max_result_bytes: int, on_tools_changed: OnToolsChanged | None,
                 elicit: Elicit | None, variables: Variables = process_environment,
                 on_log: OnLog | None = None, vault: Vault | None = None,
                 open_url: OpenUrl | None = None, client_metadata_url: str | None = None,
                 sandbox: Sandbox | None = None, installs: Path | None = None) -> None:
        self.max_result_bytes = max_result_bytes
        self.journal = Journal(installs)
        """The npx installs this sidecar began and has not seen finish (``npx_cache.py``)."""
        self.sandbox = sandbox or Sandbox()
        """Confines the stdio servers the user opted in (``ServerConfig.sandbox``)."""
        self.on_log = on_log
        self.variables = variables
        self.vault = vault
        """Where OAuth sign-ins are kept; without one, remote servers connect without OAuth."""
        self.open_url = open_url
        self.client_metadata_url = client_metadata_url
        self._signing_in: set[str] = set()
        self.on_tools_changed = on_tools_changed
        self.elicit = elicit
        self._sdk_lock: anyio.Lock | None = None

    async def load_sdk(self) -> None:
        global _sdk_loaded
        if _sdk_loaded:
            return
        if self._sdk_lock is None:
            self._sdk_lock = anyio.Lock()
        async with self._sdk_lock:
            if not _sdk_loaded:
                # Abandoned when the attempt is cancelled (a stop, the server removed): the thread
                # only imports, and a stop need not wait the seconds it may take on a busy machine.
                await anyio.to_thread.run_sync(_import_sdk, abandon_on_cancel=True)
                _sdk_loaded = True
                freeze_heap()  # the SDK's modules are most of the heap from now on

    async def ask(self, request: Elicitation) -> ElicitAnswer:
        """The user's answer through the `elicit` callback (read at each question, not at connect;
        a session gets this callback only when there is one)."""
        assert self.elicit is not None
        return await self.elicit(request)

    async def auth_for(self, config: ServerConfig, spec: Spec, conn: Conn) -> httpx2.Auth | None:
        """The OAuth of a remote server's connection (stored tokens, refreshed; never the browser)."""
        if self.vault is None or not uses_oauth(config):
            return None
        from . import oauth  # mcp SDK: loaded by load_sdk

        return await oauth.connection_auth(self.vault, config.key, spec.url,
                                           client_metadata_url=self.client_metadata_url,
                                           http_timeout=config.connect_timeout, on_needs_user=conn.sign_in_needed)

    async def sign_in(self, config: ServerConfig, client: dict[str, Any] | None = None) -> None:
        """The browser step of OAuth for one server (``mcpServers/login``); the tokens go to the vault.

        Raises:
            SignInFailed: what went wrong, for the user.
            Conflict: the server does not sign in with OAuth, or there is no UI to open the page.
        """
        if config.type == "stdio":
            raise Conflict("not remote", f"{config.key} is a stdio server: it has no sign-in")
        if not uses_oauth(config):
            raise Conflict("static authorization", f"{config.key} sends its own Authorization header; "
                           "remove that header to sign in with OAuth instead")
        if self.vault is None or self.open_url is None:
            raise Conflict("no sign-in", "this sidecar has no secret store or UI to sign in with")
        if config.key in self._signing_in:  # a second page and listener would race the first for the tokens
            raise Conflict("sign-in in progress", f"a sign-in to {config.key} is already waiting for the browser")
        self._signing_in.add(config.key)
        try:
            await self._sign_in(config, client)
        finally:
            self._signing_in.discard(config.key)

    async def _sign_in(self, config: ServerConfig, client: dict[str, Any] | None) -> None:
        assert self.vault is not None and self.open_url is not None
        await self.load_sdk()
        try:
            spec = await prepare(config, self.variables)
        except Failure as exc:
            raise SignInFailed("refused", exc.message, server=config.key) from None
        from . import oauth_login  # mcp SDK: loaded by load_sdk above

        await oauth_login.sign_in(self.vault, config.key, spec.url, spec.headers, open_url=self.open_url,
                                  client_metadata_url=self.client_metadata_url,
                                  http_timeout=config.connect_timeout, kind=config.type, client=client)

    async def sign_out(self, key: str, http_timeout: float) -> None:
        """Revoke (best effort) and forget a server's OAuth sign-in."""
        if self.vault is None:
            return
        if await self.vault.get(signin.record_name(key)):
            await self.load_sdk()
            from . import oauth_revoke  # mcp SDK and httpx2: loaded by load_sdk above

            with anyio.move_on_after(http_timeout):
                await oauth_revoke.revoke(self.vault, key, http_timeout=http_timeout)
        await signin.forget(self.vault, key)

    async def _start(self, srv: LiveServer, spec: Spec, conn: Conn,
                     stack: AsyncExitStack) -> tuple[Install | None, Streams]:
        """Start a stdio server's child (a package runner's first start with its ``Install``); its
        streams, open until ``stack`` closes."""
        config = srv.config
        install: Install | None = None
        runner = runners.recognise(spec.argv[0], spec.argv[1:])
        srv.runner = runner.name if runner is not None else None
        if runner is not None and not srv.installed:
            install = Install(srv, runner, self.journal, spec.env)
            await install.before()
            stack.push_async_callback(install.after)  # runs once the runner is stopped
        transport = StdioTransport(spec.argv, env=spec.env, cwd=spec.cwd, label=config.key,
                                   max_line=self.max_result_bytes + (1 << 20), closed=conn.lost,
                                   sandbox=self.sandbox if config.sandbox is not None else None,
                                   confinement=config.sandbox)
        conn.transport = transport
        if install is not None:  # stopped mid-install: SIGTERM at once, and time to roll back
            transport.stop_grace, transport.kill_grace = 0.0, TERM_GRACE
        # The args stay out of the log: people put tokens in them.
        log.info("MCP server %s: starting %s (%d args)", config.key, config.command, len(config.args))
        try:
            return install, await stack.enter_async_context(transport.open())
        except OSError as exc:
            raise Failure(f"could not start {spec.argv[0]}: {exc.strerror or exc}") from None

    async def attempt(self, srv: LiveServer, conn: Conn) -> None:
        """One connection: connect, serve until lost. Always ends by raising `Failure` (or cancellation)."""
        config = srv.config
        spec: Spec | None = None
        srv.conn = conn
        srv.changed()
        try:
            with conn.scope:
                spec = await prepare(config, self.variables)
                async with AsyncExitStack() as stack:
                    # A stdio child starts before the SDK is loaded: its own start-up (often an
                    # interpreter importing its SDK) runs beside ours instead of after it.
                    install, streams = (await self._start(srv, spec, conn, stack) if config.type == "stdio"
                                        else (None, None))
                    await self.load_sdk()
                    from . import session  # mcp SDK: loaded by load_sdk above

                    await session.connect_and_serve(self, srv, conn, spec, streams, install)
        except BaseException as exc:
            # The SDK's and our transports' task groups wrap whatever crosses them in exception groups.
            failures = [e for e in flatten(exc) if isinstance(e, Failure)]
            if failures:
                raise failures[0] from None
            if conn.needs_user is not None:
                raise Failure(conn.needs_user, needs_auth=True) from None
            if not isinstance(exc, Exception) or only_cancelled(exc):
                raise
            raise Failure(describe(config, spec.url if spec is not None else None, exc)) from None
        if conn.scope.cancelled_caught:
            raise Failure("reconnecting")
        raise Failure("the connection ended")
