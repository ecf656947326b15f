"""HTTP tools (seed 002): templated REST calls declared in toolset.yaml and run by the sidecar
itself (spec.py: the declaration; templates.py; runner.py and wire.py: running; results.py;
guard.py: where a request may go; auth.py and oauth.py: the auth helpers and the OAuth2 token cache)."""
