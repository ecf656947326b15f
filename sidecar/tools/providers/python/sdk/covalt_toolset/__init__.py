"""The tool-author SDK: ``from covalt_toolset import tool, get_context`` (seed 000 §4).

Imported by toolset code inside a worker process, so it stays on the standard library plus
msgspec; pydantic is only touched when a tool's own annotations already brought it in.
"""

from ._context import ToolContext, clear_context, get_context, set_context
from ._legacy import check_legacy_args, legacy_call
from ._schema import ArgumentError, input_schema_for, output_schema_for
from ._tool import ToolSpec, get_tool_spec, tool, validate_args

__all__ = [
    "ArgumentError",
    "ToolContext",
    "ToolSpec",
    "check_legacy_args",
    "clear_context",
    "get_context",
    "get_tool_spec",
    "input_schema_for",
    "legacy_call",
    "output_schema_for",
    "set_context",
    "tool",
    "validate_args",
]
