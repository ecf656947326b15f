"""HTTP tools: templated REST calls declared in toolset.yaml (guard.py: where a request may go)."""
