"""HTTP tools: templated REST calls declared in toolset.yaml (guard.py: where a request may go; auth.py:
the auth helpers, bearer, basic, API key, HMAC signing and OAuth2; oauth.py: the OAuth2 token cache)."""
