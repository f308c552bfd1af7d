"""Result shaping: what a call's result looks like by the time the model gets it.

A result longer than the policy allows goes back as a preview, its full text saved in
a `ResultStore` that the ``read_tool_result`` pager reads (`open_results` registers the
pager with the store, so the tool a notice names is callable); a page the pager
returned is never capped again. An `after_call` hook's replacement is checked before
it takes a result's place.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from toolbridge.core.errors import ErrorKind, ToolError
from toolbridge.core.registry import ToolRegistry
from toolbridge.core.results import MalformedResult, check_result, text_length
from toolbridge.core.tool import ToolResult
from toolbridge.execution.hooks import ExecutorHook
from toolbridge.execution.outcomes import OutcomeStatus, ToolOutcome
from toolbridge.execution.result_store import PAGE_METADATA_KEY, ResultStore, cap_result
from toolbridge.tools.tool_results import attach_pager

__all__ = ["ResultCap", "open_results", "replace_result"]

logger = logging.getLogger(__name__)


def open_results(
    registry: ToolRegistry, results_dir: str | Path | None, *, max_age: float, max_count: int
) -> ResultStore:
    """Where long results are saved (see `ExecutionPolicy`), with the pager attached."""
    store = _result_store(registry, results_dir, max_age=max_age, max_count=max_count)
    attach_pager(registry, store)  # the notice names it: it must be callable
    return store


def _result_store(
    registry: ToolRegistry, results_dir: str | Path | None, *, max_age: float, max_count: int
) -> ResultStore:
    ctx = registry.context
    options: dict[str, Any] = {"max_age": max_age, "max_count": max_count}
    if results_dir is None:
        return ResultStore.for_workspace(ctx.workspace, ctx.session, **options)
    folder = Path(results_dir)
    if not folder.is_absolute():
        folder = ctx.workspace / folder
        return ResultStore(folder, ctx.session, boundary=ctx.workspace, **options)
    return ResultStore(folder, ctx.session, **options)


class ResultCap:
    """Cuts a result longer than `max_chars` to a preview, saving it whole in `store`."""

    def __init__(self, max_chars: int, preview_chars: int, store: ResultStore | None) -> None:
        self.max_chars = max_chars
        self.preview_chars = preview_chars
        self.store = store

    def too_long(self, result: ToolResult) -> bool:
        """Whether `result` must be capped (a pager's page never is: it was asked for)."""
        return PAGE_METADATA_KEY not in result.metadata and text_length(result) > self.max_chars

    async def apply(self, result: ToolResult, call_id: str) -> ToolResult:
        """`result` as a preview, saved whole when it can be (else the preview alone)."""
        try:
            return await asyncio.to_thread(
                cap_result,
                result,
                call_id=call_id,
                max_chars=self.max_chars,
                store=self.store,
                preview_chars=self.preview_chars,
            )
        except Exception as exc:  # saving is a convenience: the preview still goes back
            logger.warning("could not save the long result of call %r: %r", call_id, exc)
            return cap_result(
                result,
                call_id=call_id,
                max_chars=self.max_chars,
                store=None,
                preview_chars=self.preview_chars,
            )


def replace_result(outcome: ToolOutcome, result: ToolResult, hook: ExecutorHook) -> None:
    """Put an `after_call` replacement in `outcome`; ok/error follows the new result."""
    try:
        check_result(result)
    except MalformedResult as exc:
        logger.error("after_call hook %r returned a malformed result, ignored: %s", hook, exc)
        return
    outcome.result = result
    if outcome.status not in (OutcomeStatus.OK, OutcomeStatus.ERROR):
        return
    if not result.is_error:
        outcome.status, outcome.error = OutcomeStatus.OK, None
        return
    outcome.status = OutcomeStatus.ERROR
    kind = result.error_kind or ErrorKind.EXECUTION_ERROR
    if outcome.error is None or outcome.error.kind is not kind:
        outcome.error = ToolError(kind, result.text)
