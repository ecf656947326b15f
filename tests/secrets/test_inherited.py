"""The one allow-list of what a child inherits from the sidecar's environment (secrets/inherited.py):
this machine's certificate and proxy settings reach every tool process, the package managers'
settings reach MCP servers, a server's envPassthrough adds names, and nothing that is or says it is
a secret gets through."""

from __future__ import annotations

import pytest

from sidecar.children import scrubbed_env
from sidecar.secrets import clean, inherited, known

MACHINE = {
    "PATH": "/usr/bin", "HOME": "/home/u", "LC_ALL": "C.UTF-8",
    "SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt", "SSL_CERT_DIR": "/etc/ssl/certs",
    "REQUESTS_CA_BUNDLE": "/etc/ssl/ca.pem", "CURL_CA_BUNDLE": "/etc/ssl/ca.pem", "NODE_EXTRA_CA_CERTS": "/etc/ca.pem",
    "PIP_CERT": "/etc/ca.pem", "HTTPS_PROXY": "http://proxy.corp:3128", "https_proxy": "http://proxy.corp:3128",
    "NO_PROXY": "localhost,.corp", "no_proxy": "localhost", "ALL_PROXY": "socks5://proxy.corp:1080",
    "UV_INDEX_URL": "https://pypi.corp/simple", "npm_config_registry": "https://npm.corp/",
    "PIP_INDEX_URL": "https://pypi.corp/simple", "XDG_CACHE_HOME": "/home/u/.cache",
    # never, for anyone:
    "OPENAI_API_KEY": "sk-proj-abcdef123456", "ANTHROPIC_API_KEY": "sk-ant-xyz123456", "SIDECAR_LOG_LEVEL": "debug",
    "UV_PUBLISH_TOKEN": "pypi-AgEIcHlwaS5vcmc", "npm_config__authToken": "npm_abcdefABCDEF123456",
    "UV_INDEX_CORP_PASSWORD": "hunter22", "GITHUB_TOKEN": "ghp_abcdefghijklmnop", "MY_SETTING": "on",
}


def test_tools_get_certificates_and_proxies_servers_also_package_settings():
    tools = inherited.inherited(network=True, environ=MACHINE)
    servers = inherited.inherited(network=True, package_runners=True, environ=MACHINE)
    for name in ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
                 "PIP_CERT", "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY", "PATH", "LC_ALL"):
        assert tools[name] == MACHINE[name] and servers[name] == MACHINE[name], name
    for name in ("UV_INDEX_URL", "npm_config_registry", "PIP_INDEX_URL", "XDG_CACHE_HOME"):
        assert name not in tools and servers[name] == MACHINE[name], name
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "SIDECAR_LOG_LEVEL", "UV_PUBLISH_TOKEN",
                 "npm_config__authToken", "UV_INDEX_CORP_PASSWORD", "GITHUB_TOKEN", "MY_SETTING"):
        assert name not in servers, name
    base_only = inherited.inherited(network=False, environ=MACHINE)
    assert set(base_only) == {"PATH", "HOME", "LC_ALL"}


def test_a_passthrough_adds_names_but_never_a_refused_one():
    given = inherited.inherited(network=True, names=["MY_SETTING", "OPENAI_API_KEY", "GITHUB_TOKEN", "UNSET_ONE"],
                                environ=MACHINE)
    assert given["MY_SETTING"] == "on"
    assert "OPENAI_API_KEY" not in given and "GITHUB_TOKEN" not in given and "UNSET_ONE" not in given
    names = inherited.inherited_names(network=True, package_runners=True, names=["MY_SETTING"], environ=MACHINE)
    assert "MY_SETTING" in names and "SSL_CERT_FILE" in names and "PATH" not in names  # basics go without saying


@pytest.mark.parametrize(("name", "says"), [
    ("OPENAI_API_KEY", "model provider's key"),
    ("anthropic_api_key", "model provider's key"),
    ("SIDECAR_DATA_DIR", "sidecar's own settings"),
    ("GITHUB_TOKEN", "looks like a secret"),
    ("DB_PASSWORD", "looks like a secret"),
])
def test_refused_names_say_why_and_what_to_write_instead(name: str, says: str):
    why = inherited.refusal(name)
    assert why is not None and says in why
    if "secret" in says:
        assert f'"${{{name}}}"' in why  # the way that works: env with a reference
    assert inherited.refusal("MY_SETTING") is None and inherited.refusal("NODE_OPTIONS") is None


def test_a_password_in_a_proxy_url_is_masked_wherever_it_turns_up():
    env = {"PATH": "/usr/bin", "HTTPS_PROXY": "http://alice:pr0xy-Pa55word@proxy.corp:3128",
           "PIP_INDEX_URL": "https://__token__:idx-S3cret-value@pypi.corp/simple", "NO_PROXY": "a@b,.corp"}
    try:
        given = inherited.inherited(network=True, package_runners=True, environ=env)
        assert given["HTTPS_PROXY"] == env["HTTPS_PROXY"]  # the server needs it to get out
        # A URL's userinfo is masked by its shape anyway; the value alone (a program quoting the
        # password it sent) is masked because it is known.
        line = (f"npm ERR! proxy {env['HTTPS_PROXY']} refused; index {env['PIP_INDEX_URL']}; "
                "407 for user alice password pr0xy-Pa55word, token idx-S3cret-value")
        cleaned = clean(line)
        assert "pr0xy-Pa55word" not in cleaned and "idx-S3cret-value" not in cleaned
        assert "proxy.corp:3128" in cleaned  # the rest stays readable
    finally:
        known.forget("pr0xy-Pa55word")
        known.forget("idx-S3cret-value")


def test_scrubbed_env_puts_the_allow_list_under_what_it_is_given(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("SSL_CERT_FILE", "/etc/ssl/x.pem")
    monkeypatch.setenv("UV_CACHE_DIR", "/var/cache/uv")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-sidecar-secret")
    worker = scrubbed_env({"COVALT_TOOLSET_ID": "t"})
    assert worker["SSL_CERT_FILE"] == "/etc/ssl/x.pem" and "UV_CACHE_DIR" not in worker
    assert "OPENAI_API_KEY" not in worker and worker["COVALT_TOOLSET_ID"] == "t"
    server = scrubbed_env({"SSL_CERT_FILE": "/mine.pem"}, package_runners=True)
    assert server["SSL_CERT_FILE"] == "/mine.pem" and server["UV_CACHE_DIR"] == "/var/cache/uv"


def test_the_certificate_files_the_environment_names_are_what_a_sandbox_must_show(tmp_path):
    ca = tmp_path / "corp-ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    env = {"SSL_CERT_FILE": str(ca), "SSL_CERT_DIR": f"{tmp_path}:/nonexistent/certs", "NODE_EXTRA_CA_CERTS": "rel.pem",
           "HTTPS_PROXY": "http://proxy:3128"}
    assert inherited.certificate_paths(env) == sorted([str(ca), str(tmp_path)])
