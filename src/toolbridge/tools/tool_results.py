"""Built-in `read_tool_result`: page through a tool result that was too long to send whole.

When the executor cuts a long result down to a preview, it stores the full text in
its `ResultStore` and tells the model the call id; this tool reads it back page by
page. `ToolExecutor` registers it (or adds its store to the one already registered),
so the tool a notice names is always callable; offsets count characters.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any, ClassVar

from toolbridge.core.errors import ToolDefinitionError, ToolExecutionError
from toolbridge.core.registry import ToolRegistry
from toolbridge.core.tool import Tool, ToolResult, current_context, tool_parameters
from toolbridge.execution.result_store import PAGE_METADATA_KEY, PAGER_TOOL, ResultStore

__all__ = ["ReadToolResult", "attach_pager"]

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
                "description": "Where to start, in characters: 0, then the next_offset of "
                "the previous page.",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_PAGE,
                "default": 20_000,
                "description": "How many characters to read (at most 100000).",
            },
        },
        "required": ["call_id"],
        "additionalProperties": False,
    }
)
class ReadToolResult(Tool):
    """Reads a saved tool result in pages from the stores it was given.

    Without stores (built by the loader), it reads the default store of the call's
    workspace and session, where an executor with the default policy saves.
    """

    name = PAGER_TOOL
    description = (
        "Read the full output of an earlier tool call whose result was too long and was "
        "saved. Give the call id from the notice, and page with offset/limit (characters)."
    )
    read_only = True
    # The saved results live where the executor runs: a backend must run this tool there.
    caller_side: ClassVar[bool] = True

    def __init__(self, stores: Iterable[ResultStore] = ()) -> None:
        self.stores: list[ResultStore] = list(stores)

    def add_store(self, store: ResultStore) -> None:
        """Also read results from `store` (once; stores are compared by folder)."""
        if all(known.directory != store.directory for known in self.stores):
            self.stores.append(store)

    def _store_for(self, call_id: str) -> ResultStore:
        if not self.stores:
            ctx = current_context()
            return ResultStore.for_workspace(ctx.workspace, ctx.session)
        return next((s for s in self.stores if s.has(call_id)), self.stores[0])

    async def execute(self, **kwargs: Any) -> ToolResult:
        call_id: str = kwargs["call_id"]
        offset: int = kwargs.get("offset", 0)
        limit: int = kwargs.get("limit", 20_000)
        store = self._store_for(call_id)
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
            footer = f"[more: call {PAGER_TOOL} with offset={page.next_offset}]"
        header = f"[characters {page.offset:,}-{page.next_offset:,} of {page.size:,}]"
        # A page is what the model asked for: the executor must not cap it into a file again.
        return ToolResult(
            f"{header}\n{page.text}\n{footer}",
            metadata={PAGE_METADATA_KEY: page.metadata(call_id)},
        )


def attach_pager(registry: ToolRegistry, store: ResultStore) -> ReadToolResult:
    """Make `read_tool_result` in `registry` read from `store`: register it, or add the store.

    A tool of another kind already registered under that name is an error: a notice
    must never point the model at a tool that does something else.
    """
    existing = registry.get(PAGER_TOOL)
    if existing is None:
        pager = ReadToolResult([store])
        registry.register(pager)
        return pager
    if not isinstance(existing, ReadToolResult):
        raise ToolDefinitionError(
            f"a tool named {PAGER_TOOL!r} ({type(existing).__name__}) is registered, but "
            "saved results are paged with toolbridge's own: rename that tool, or use "
            "ExecutionPolicy(persist_results=False)"
        )
    existing.add_store(store)
    return existing
