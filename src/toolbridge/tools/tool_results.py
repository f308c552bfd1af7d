"""Built-in `read_tool_result`: page through a tool result that was too long to send whole.

When the executor cuts a long result down to a preview, it stores the full text in
the workspace and tells the model the call id; this tool reads it back page by page.
"""

from __future__ import annotations

import asyncio
from typing import Any

from toolbridge.errors import ToolExecutionError
from toolbridge.results import PAGE_METADATA_KEY, ResultStore
from toolbridge.tool import Tool, ToolResult, current_context, tool_parameters

__all__ = ["ReadToolResult"]

MAX_PAGE = 100_000


@tool_parameters(
    {
        "type": "object",
        "properties": {
            "call_id": {
                "type": "string",
                "minLength": 1,
                "description": "The id of the tool call whose full output was saved.",
            },
            "offset": {
                "type": "integer",
                "minimum": 0,
                "default": 0,
                "description": "Where to start, in bytes: 0, then the next_offset of the "
                "previous page.",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_PAGE,
                "default": 20_000,
                "description": "How many bytes to read (at most 100000).",
            },
        },
        "required": ["call_id"],
        "additionalProperties": False,
    }
)
class ReadToolResult(Tool):
    """Reads a saved tool result in pages; only the session's own results are reachable."""

    name = "read_tool_result"
    description = (
        "Read the full output of an earlier tool call whose result was too long and was "
        "saved. Give the call id from the notice, and page with offset/limit."
    )
    read_only = True

    async def execute(self, **kwargs: Any) -> ToolResult:
        call_id: str = kwargs["call_id"]
        offset: int = kwargs.get("offset", 0)
        limit: int = kwargs.get("limit", 20_000)
        ctx = current_context()
        store = ResultStore(ctx.workspace, ctx.session)
        try:
            page = await asyncio.to_thread(store.read, call_id, offset, limit)
        except FileNotFoundError:
            raise ToolExecutionError(
                f"no saved result for call id {call_id!r}.",
                hint="Use the exact call id given in a notice that said the full output was "
                "saved; results of other sessions and pruned results are not available.",
            ) from None
        if page.at_end:
            footer = "[end of the saved result]"
        else:
            footer = f"[more: call read_tool_result with offset={page.next_offset}]"
        header = f"[bytes {page.offset:,}-{page.next_offset:,} of {page.size:,}]"
        # A page is what the model asked for: the executor must not cap it into a file again.
        return ToolResult(
            f"{header}\n{page.text}\n{footer}",
            metadata={PAGE_METADATA_KEY: {"call_id": call_id, "next_offset": page.next_offset}},
        )
