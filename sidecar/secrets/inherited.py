"""Which of the sidecar's environment variables a child process inherits: the one allow-list.

The sidecar's environment holds what no tool may see (the model providers' keys, tokens the desktop
app passed in), so a child gets an allow-list, never a copy. It has three parts:

- ``BASE``: what any program needs to run (PATH, HOME, USER, LANG, TZ, TMPDIR, ``LC_*``, Windows'
  SYSTEMROOT...), and coverage's own settings so scripts/coverage measures children too.
- ``NETWORK``: how this machine reaches the network. Certificate authorities (``SSL_CERT_FILE``,
  ``SSL_CERT_DIR``, ``REQUESTS_CA_BUNDLE``, ``CURL_CA_BUNDLE``, ``NODE_EXTRA_CA_CERTS``,
  ``PIP_CERT``, ``GIT_SSL_CAINFO``...) and proxies (``HTTP_PROXY``, ``HTTPS_PROXY``, ``NO_PROXY``,
  ``ALL_PROXY`` in both cases). Behind a company proxy or CA nothing reaches HTTPS without them.
  Every tool process gets these: Python toolset workers, ``run_command`` and MCP servers.
- ``PACKAGE_RUNNERS``: the package managers' settings (``UV_*``, ``npm_config_*``, ``PIP_*``,
  ``PIPX_*``, ``BUN_*``, ``PNPM_*``, ``YARN_*``, ``COREPACK_*``, the ``XDG_*`` folders their caches
  live in, ``NVM_DIR``, ``VOLTA_HOME``...): where to install from and where to cache. Only stdio MCP
  servers get these: they are what ``npx -y`` and ``uvx`` run under.

None of these is a secret by design, but some can carry one: a proxy URL or a package index URL
with ``user:password@``, or a name such as ``UV_PUBLISH_TOKEN`` or ``npm_config__authToken`` that
falls under a prefix. A name that says it holds a secret (``secrets.shapes.looks_secret_name``) is
never inherited through a prefix, and the password of a URL that is inherited is registered as a
known secret, so it is masked wherever it turns up (a log line, a server's stderr in an error).

A server's ``envPassthrough`` names more variables for that server alone. ``refusal`` refuses the
names that must never be passed: the model providers' keys, the sidecar's own settings
(``SIDECAR_*``) and any name that says it holds a secret (those go through ``env`` as a ``${NAME}``
reference, which the user sees in secrets/list beside the server using it).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

from . import known
from .shapes import looks_secret_name

BASE_NAMES = frozenset({"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR",
                        "TERM", "SYSTEMROOT", "WINDIR", "COMSPEC", "PATHEXT", "TEMP", "TMP"})
# Coverage's own settings (scripts/coverage measures tool workers and MCP servers too); no secrets.
BASE_PREFIXES = ("LC_", "COVERAGE_PROCESS_")

_PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "FTP_PROXY")
# Certificate authorities, as OpenSSL, Python's requests and httpx, curl, Node, pip, git, the AWS and
# Google SDKs, gRPC, httplib2, Nix and Deno read them: each names a file or a folder.
CERTIFICATE_NAMES = frozenset({
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "PIP_CERT",
    "GIT_SSL_CAINFO", "GIT_SSL_CAPATH", "AWS_CA_BUNDLE", "CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE",
    "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", "HTTPLIB2_CA_CERTS", "NIX_SSL_CERT_FILE", "DENO_CERT",
})
NETWORK_NAMES = frozenset({
    *CERTIFICATE_NAMES, "NODE_USE_SYSTEM_CA",
    # Proxies, in the upper and the lower case programs variously read.
    *_PROXIES, *(p.lower() for p in _PROXIES),
})
PACKAGE_RUNNER_NAMES = frozenset({"NVM_DIR", "NVM_BIN", "VOLTA_HOME", "FNM_DIR", "PYENV_ROOT", "CARGO_HOME",
                                  "RUSTUP_HOME", "GOPATH", "GOPROXY", "GOFLAGS", "DOCKER_HOST",
                                  "DOCKER_CONFIG", "DOCKER_CONTEXT"})
PACKAGE_RUNNER_PREFIXES = ("UV_", "npm_config_", "NPM_CONFIG_", "PIP_", "PIPX_", "BUN_", "PNPM_", "YARN_",
                           "COREPACK_", "XDG_")

# The variables the model providers' SDKs read their keys from (chat/providers/*: env_key) and those of
# the other common providers: a server has no business with the user's model account.
PROVIDER_KEYS = frozenset({"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "AZURE_OPENAI_API_KEY",
                           "GEMINI_API_KEY", "GOOGLE_API_KEY", "MISTRAL_API_KEY", "GROQ_API_KEY",
                           "OPENROUTER_API_KEY", "DEEPSEEK_API_KEY", "XAI_API_KEY", "COHERE_API_KEY",
                           "TOGETHER_API_KEY", "FIREWORKS_API_KEY", "PERPLEXITY_API_KEY", "OPENAI_ORG_ID",
                           "OPENAI_PROJECT_ID", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"})
SIDECAR_PREFIX = "SIDECAR_"  # the sidecar's own settings (settings.py), which a child never needs



def _has(name: str, names: frozenset[str], prefixes: tuple[str, ...]) -> bool:
    return name in names or (name.startswith(prefixes) and not looks_secret_name(name))


def is_base(name: str) -> bool:
    return name in BASE_NAMES or name.startswith(BASE_PREFIXES)


def is_network(name: str) -> bool:
    return name in NETWORK_NAMES


def is_package_runner(name: str) -> bool:
    return _has(name, PACKAGE_RUNNER_NAMES, PACKAGE_RUNNER_PREFIXES)


def refusal(name: str) -> str | None:
    """Why ``name`` may not be passed through to a server, or None when it may."""
    if name.upper() in PROVIDER_KEYS:
        return (f"{name} is a model provider's key (or setting): the sidecar never passes it to a server. If a "
                f"server really needs it, give it in env as {{\"{name}\": \"${{{name}}}\"}}")
    if name.upper().startswith(SIDECAR_PREFIX):
        return f"{name} is one of the sidecar's own settings, which no server is given"
    if looks_secret_name(name):
        return (f"{name} looks like a secret, which envPassthrough does not pass: give it in env as "
                f"{{\"{name}\": \"${{{name}}}\"}} (the value then comes from secrets/set or the environment, "
                "and secrets/list shows this server uses it)")
    if not name or "=" in name or "\x00" in name:
        return "not a variable name"
    return None


def inherited(*, network: bool, package_runners: bool = False, names: Iterable[str] = (),
              environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables of ``environ`` (the process's) a child gets: ``BASE``, ``NETWORK`` when
    ``network``, ``PACKAGE_RUNNERS`` when ``package_runners``, and ``names`` (a server's
    envPassthrough, checked by ``refusal`` when it was declared; checked again here, as a name
    stored by an older version never was). A credential inside a URL value is remembered as secret."""
    env = os.environ if environ is None else environ
    extra = {n for n in names if refusal(n) is None}
    out: dict[str, str] = {}
    for name, value in env.items():
        if (is_base(name) or (network and is_network(name)) or (package_runners and is_package_runner(name))
                or name in extra):
            out[name] = value
            if "@" in value and not is_base(name):
                _remember_url_credentials(value)
    return out


def inherited_names(*, network: bool, package_runners: bool = False, names: Iterable[str] = (),
                    environ: Mapping[str, str] | None = None) -> list[str]:
    """The names ``inherited`` would pass beyond ``BASE``, sorted (what debug/info and a server show)."""
    got = inherited(network=network, package_runners=package_runners, names=names, environ=environ)
    return sorted(n for n in got if not is_base(n))


def _remember_url_credentials(value: str) -> None:
    """``http://user:secret@proxy:3128`` -> ``secret`` (and the user, which may be a token itself) is masked
    from now on. A NO_PROXY list or a path with an ``@`` is no URL: nothing to remember."""
    for part in value.split(","):
        try:
            url = urlsplit(part.strip())
        except ValueError:
            continue
        if url.password:
            known.remember(url.password)
        if url.username and url.password is None and "@" in url.netloc:
            known.remember(url.username)  # https://TOKEN@host: the user is the credential


def certificate_paths(env: Mapping[str, str]) -> list[str]:
    """The files and folders ``env``'s certificate settings name (absolute, existing; ``SSL_CERT_DIR``
    may list several): what a sandbox with a network must show, read-only, for TLS to work with a
    company CA kept outside the system's folders."""
    found: set[str] = set()
    for name in CERTIFICATE_NAMES:
        for path in env.get(name, "").split(os.pathsep):
            if os.path.isabs(path) and os.path.exists(path):
                found.add(os.path.normpath(path))
    return sorted(found)
