"""Approval of tool calls: which calls need it, and decisions bound to the exact arguments.

A decision is keyed by the tool name and a SHA-256 of the canonical JSON of the
validated arguments, and is used once. Approving ``rm(path="a")`` therefore says
nothing about ``rm(path="b")``, and a changed call needs a new decision. An approval
says who (or what) gave it (`by`), so the journal can keep that next to the call.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from toolbridge.core.jsontext import compact_encoder, json_default
from toolbridge.core.tool import Tool

__all__ = [
    "BY_DECISION",
    "ApprovalRequest",
    "ApprovalRule",
    "Approvals",
    "arguments_digest",
    "canonical_arguments",
    "digest_of",
    "plain_canonical",
    "requires_approval_flag",
    "writes_need_approval",
]

BY_DECISION = "decision"
"""Who approved, when a program approved without saying (`Approvals.approve`'s default)."""

ApprovalRule = Callable[[Tool, Mapping[str, Any]], bool]
"""Decides whether a prepared call must be approved before it runs."""


_CANONICAL = compact_encoder(sort_keys=True, default=json_default)


def canonical_arguments(args: Mapping[str, Any]) -> str:
    """The arguments as canonical JSON: sorted keys, no spaces, models and dataclasses dumped."""
    return _CANONICAL(args)


def arguments_digest(tool_name: str, args: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the tool name and the canonical arguments."""
    return digest_of(tool_name, canonical_arguments(args))


def digest_of(tool_name: str, canonical: str) -> str:
    """`arguments_digest` of arguments whose canonical JSON is `canonical`."""
    return hashlib.sha256(f"{tool_name}\n{canonical}".encode()).hexdigest()


def _not_plain(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is not JSON data")


_PLAIN = compact_encoder(sort_keys=True, default=_not_plain, allow_nan=False)
_SURROGATE = re.compile("[\ud800-\udfff]")


def plain_canonical(args: Mapping[str, Any]) -> str | None:
    """The canonical JSON of arguments that are plain JSON data (what a model sends): no
    NaN or infinity, no lone surrogate, nothing `json_default` turns into data; None for
    any other. Such text is what `canonical_arguments` writes, and what the journal stores
    (keys sorted), so the digest and the stored text come from one encoding."""
    try:
        text = _PLAIN(args)
    except (TypeError, ValueError):  # not plain data, NaN or an infinity, or a loop
        return None
    if not text.isascii() and _SURROGATE.search(text) is not None:
        return None
    return text


def requires_approval_flag(tool: Tool, args: Mapping[str, Any]) -> bool:
    """The default rule: a tool asks for approval by setting ``requires_approval = True``."""
    return tool.requires_approval


def writes_need_approval(tool: Tool, args: Mapping[str, Any]) -> bool:
    """A stricter rule: every tool that is not read-only (or that asks for it) needs approval."""
    return not tool.read_only or requires_approval_flag(tool, args)


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """A call that waits for a decision: show it to the user, then approve or deny it."""

    call_id: str
    tool_name: str
    arguments: Mapping[str, Any]
    digest: str
    retry: bool = False
    """True for a call a crash interrupted: approving it runs it again (it may have partly run)."""


_TAKEN_KEPT = 1024
"""How many used grants `Approvals` remembers for `taken_by` (asked right after the take)."""


@dataclass(frozen=True, slots=True)
class _Grant:
    by: str


@dataclass(frozen=True, slots=True)
class _Denial:
    reason: str


class Approvals:
    """Pending decisions of one executor: granted or denied, each used by one call.

    A used grant is remembered (one per tool and digest, the last one) until `taken_by`
    asks who gave it: the executor puts that in the journal's record of the call.
    """

    def __init__(self) -> None:
        self._decisions: dict[tuple[str, str], _Grant | _Denial] = {}
        self._taken: dict[tuple[str, str], str] = {}

    def approve(self, request: ApprovalRequest, *, by: str = BY_DECISION) -> None:
        """Let the next call of this tool with these exact arguments run.

        `by` says who or what approved, for the journal: ``"user:alice"`` (asked at a
        prompt), ``"--yes"`` (a command-line flag), ``"hook:<name>"``, or anything that
        names the approver in your application; ``"decision"`` when not said.
        """
        if not by:
            raise ValueError("by must name who or what approved the call, got ''")
        self._decisions[(request.tool_name, request.digest)] = _Grant(by)

    def deny(self, request: ApprovalRequest, reason: str = "") -> None:
        """Refuse the next call of this tool with these exact arguments."""
        self._decisions[(request.tool_name, request.digest)] = _Denial(reason)

    def granted(self, tool_name: str, digest: str) -> bool:
        """Whether the next call of this tool with these arguments is approved (not used up)."""
        return isinstance(self._decisions.get((tool_name, digest)), _Grant)

    def take(self, tool_name: str, digest: str) -> bool | str | None:
        """Use up the decision for a call: True (approved), a denial reason, or None."""
        decision = self._decisions.pop((tool_name, digest), None)
        if isinstance(decision, _Denial):
            return decision.reason
        if decision is None:
            return None
        if len(self._taken) >= _TAKEN_KEPT:  # nobody asked (no journal): forget the oldest
            del self._taken[next(iter(self._taken))]
        self._taken[(tool_name, digest)] = decision.by
        return True

    def idle(self) -> bool:
        """Whether no decision waits and none was used and not asked about: the common
        case, in which a call needs no look-up here."""
        return not self._decisions and not self._taken

    def has_taken(self) -> bool:
        """Whether any decision was used and not yet asked about with `taken_by`."""
        return bool(self._taken)

    def taken_by(self, tool_name: str, digest: str) -> str | None:
        """Who gave the approval the last `take` of this call used up (asked once)."""
        return self._taken.pop((tool_name, digest), None)

    def __len__(self) -> int:
        return len(self._decisions)
