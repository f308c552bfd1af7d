"""The loop guard: stop a model from repeating a failing call or hammering a refused target.

Generic, for every tool: failures are counted per (tool, canonical arguments), and
refused external targets (the ``target`` of a `PolicyViolation`) are counted per
target. The model is warned first and then the call is blocked before it runs,
with a message that gets firmer every time it is ignored.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from toolbridge.core.errors import ErrorKind, ToolError
from toolbridge.execution.approval import canonical_arguments

__all__ = ["LoopGuard"]


class LoopGuard:
    """Counts repeated failures; `check` blocks a call, `record` learns from an outcome.

    Checking costs nothing until something has failed, so the guard stays off the
    fast path of healthy batches.
    """

    def __init__(self, *, warn_after: int = 2, block_after: int = 2) -> None:
        if not 1 <= warn_after <= block_after:
            raise ValueError("the loop guard needs 1 <= warn_after <= block_after")
        self.warn_after = warn_after
        self.block_after = block_after
        self._failures: dict[str, dict[str, int]] = {}
        self._targets: dict[str, int] = {}
        self._blocked: dict[str, int] = {}
        # The boundary each refused target (and each call that was refused for one) met.
        self._boundaries: dict[str, tuple[str, ErrorKind]] = {}

    def check(self, tool_name: str, args: Mapping[str, Any]) -> ToolError | None:
        """The error to report instead of running this call, or None to let it run."""
        if not self._failures and not self._targets:
            return None
        per_tool = self._failures.get(tool_name)
        if per_tool:
            key = canonical_arguments(args)
            failures = per_tool.get(key, 0)
            if failures >= self.block_after:
                call = f"{tool_name}\n{key}"
                return self._block(
                    call,
                    f"blocked a repeated call: {tool_name!r} already failed {failures} times "
                    "with exactly these arguments, so it was not run again.",
                    self._boundaries.get(call),
                )
        for target, refusals in self._targets.items():
            if refusals >= self.block_after and _mentions(args, target):
                return self._block(
                    target,
                    f"blocked a repeated attempt at {target!r}: it was refused {refusals} "
                    "times already, so this call was not run.",
                    self._boundaries.get(target),
                )
        return None

    def record(
        self, tool_name: str, args: Mapping[str, Any], error: ToolError | None, target: str | None
    ) -> str | None:
        """Learn from a finished call; return a warning to add to its result, if any."""
        if error is None:
            per_tool = self._failures.get(tool_name)
            if per_tool:
                per_tool.pop(canonical_arguments(args), None)
            return None
        if error.kind is ErrorKind.REPEATED_CALL:
            return None
        warning = None
        per_tool = self._failures.setdefault(tool_name, {})
        key = canonical_arguments(args)
        failures = per_tool[key] = per_tool.get(key, 0) + 1
        if failures >= self.warn_after:
            warning = (
                f"Warning: this exact call has now failed {failures} times. Do not repeat it "
                "unchanged; identical calls will be blocked."
            )
        if target is not None:
            boundary = (target, error.kind)
            self._boundaries[target] = self._boundaries[f"{tool_name}\n{key}"] = boundary
            refusals = self._targets[target] = self._targets.get(target, 0) + 1
            if refusals >= self.warn_after:
                warning = (
                    f"Warning: {target!r} has been refused {refusals} times. "
                    f"{_boundary_text(*boundary)} Further attempts at it will be blocked."
                )
        return warning

    def reset(self) -> None:
        """Forget everything (for a new conversation)."""
        self._failures.clear()
        self._targets.clear()
        self._blocked.clear()
        self._boundaries.clear()

    def _block(
        self, key: str, message: str, boundary: tuple[str, ErrorKind] | None = None
    ) -> ToolError:
        times = self._blocked[key] = self._blocked.get(key, 0) + 1
        if boundary is not None:  # a respelling meets the same wall: say so, and whom to ask
            hint = _boundary_text(*boundary)
            if times > 1:
                hint = f"This is block number {times} for the same thing. {hint}"
            return ToolError(ErrorKind.REPEATED_CALL, message, hint)
        hint = "Change the arguments or use another approach."
        if times > 1:
            hint = (
                f"This is block number {times} for the same thing. Stop trying it: use a "
                "different approach, or tell the user what is not working and why."
            )
        return ToolError(ErrorKind.REPEATED_CALL, message, hint)


def _boundary_text(target: str, kind: ErrorKind) -> str:
    """What a model must do about a refused path or host: stop, and tell the user."""
    if kind is ErrorKind.WORKSPACE_VIOLATION:
        what = f"The path {target!r} is outside the workspace"
    elif kind is ErrorKind.NETWORK_VIOLATION:
        what = f"The address {target!r} is outside what the network policy allows"
    else:
        what = f"{target!r} is refused by this setup's policy"
    return (
        f"{what}: a hard boundary, not a mistake in the arguments. No other spelling, path "
        "or tool reaches it. Stop trying, and tell the user that you need "
        f"{target!r} and why; only they can change the setup."
    )


def _mentions(args: Mapping[str, Any], target: str) -> bool:
    """Whether an argument names `target` itself: equality, not a substring, so a refused
    "/" or "" does not block every later call that happens to contain one."""
    return any(text.strip() == target for text in _strings(args))


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)
