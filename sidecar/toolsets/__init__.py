"""Toolsets: the toolset.yaml manifest, bundles (ZIP or folder), and the tool registry."""
