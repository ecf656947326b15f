"""The tool noun: the catalog (ids, resolution, overrides), the one call path, argument checks,
render plans, permissions, provider-safe aliases, and the providers that run tools."""
