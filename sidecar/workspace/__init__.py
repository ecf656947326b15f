"""Per-chat workspaces: a content-addressed blob store, manifests, snapshot and materialise."""
