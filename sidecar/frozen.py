"""Which toolsets can be changed (seed 002): a disabled toolset is frozen until it is enabled
again, and a soft-deleted one refuses everything but toolsets/restore, toolsets/uninstall and
toolsets/get until it is restored. Every write inside a toolset asks here first, so the refusal
reads the same whichever method was refused.

A toolset rule that sits below the services, not in ``toolsets/``: the tools (config, limits,
MCP tools), the MCP servers, chats and schedules all ask it, and most of them sit below toolsets."""

from __future__ import annotations

from .errors import Conflict

DELETED = "toolset deleted"
DISABLED = "toolset disabled"


def refuse_if_deleted(toolset_id: str, deleted_at: str | None, what: str) -> None:
    """Conflict when the toolset is soft-deleted; ``what``: the change refused, as 'change its tools'."""
    if deleted_at is not None:
        raise Conflict(DELETED, f"the toolset {toolset_id!r} was deleted at {deleted_at}; restore it first "
                                f"(toolsets/restore) to {what}, or remove it for good (toolsets/uninstall)")


def refuse_changes(toolset_id: str, enabled: bool, deleted_at: str | None, what: str) -> None:
    """Conflict when the toolset is soft-deleted or disabled, saying what to do instead."""
    refuse_if_deleted(toolset_id, deleted_at, what)
    if not enabled:
        # A change made now would surprise whoever enables it.
        raise Conflict(DISABLED, f"the toolset {toolset_id!r} is disabled; enable it first "
                                 f"(toolsets/setEnabled) to {what}")


def deleted_tool_message(toolset_id: str) -> str:
    """Why a tool of a soft-deleted toolset cannot be found (called, scheduled, attached)."""
    return (f"its toolset {toolset_id!r} was deleted; restore it (toolsets/restore) to use its tools again")
