"""Run calls through the executor and settle the ones that wait for approval.

One path for every call: `ToolExecutor.run`, so a tool's timeout, approval rule, loop
guard and result cap hold on the command line exactly as in a program. Calls pending
approval, and interrupted calls (with a journal) the user may retry, are decided here
(``--yes``, a y/n prompt on a terminal, or denied when nobody can be asked) and sent
again. An approval names who gave it (the OS user at the prompt, or ``--yes``), for the
journal.
"""

from __future__ import annotations

import getpass
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from toolbridge.cli.app import err
from toolbridge.cli.prompt import confirm
from toolbridge.core.calls import ToolCallRequest
from toolbridge.core.jsontext import json_default
from toolbridge.execution.executor import OutcomeStatus, ToolExecutor, ToolOutcome
from toolbridge.security.terminal import escape_invisible

__all__ = [
    "BY_YES_FLAG",
    "NON_INTERACTIVE_DENIAL",
    "RETRY_NOT_ASKED",
    "RETRY_QUESTION",
    "Decide",
    "Verdict",
    "decider",
    "prompt_approver",
    "run_calls",
]

NON_INTERACTIVE_DENIAL = (
    "toolbridge ran without a terminal, so nobody could approve it; "
    "run it again with --yes to approve such calls"
)

RETRY_QUESTION = "Retry this call that may have partly run?"
"""Asked about an interrupted call (`confirm` adds `` [y/N]: ``)."""

RETRY_NOT_ASKED = (
    "not retried: it may have partly run, and only a person at a terminal can approve a retry "
    "(--yes approves calls, not retries)"
)

BY_YES_FLAG = "--yes"
"""Who approved, in the journal, when ``--yes`` did."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """An answer to one waiting call: approved (by whom) or denied (why)."""

    approved: bool
    reason: str = ""
    by: str = BY_YES_FLAG


Decide = Callable[[ToolOutcome], Verdict]
"""Given an outcome that waits for a decision (pending approval, or a retry): the verdict."""


def prompt_approver() -> str:
    """Who approves at a prompt: ``user:<OS user name>`` (``user:uid-<n>`` without one)."""
    try:
        name = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry and no USER/LOGNAME (a container, say)
        name = f"uid-{os.getuid()}"
    return f"user:{name}"


def _waits(outcome: ToolOutcome) -> bool:
    request = outcome.approval
    return request is not None and (
        request.retry or outcome.status is OutcomeStatus.PENDING_APPROVAL
    )


async def run_calls(
    executor: ToolExecutor, calls: Sequence[ToolCallRequest], decide: Decide
) -> list[ToolOutcome]:
    """Run `calls`; decide each call that waits (an approval, or the retry of an interrupted
    call), then run the approved ones again, in order, until none waits.

    A denied approval is sent again to get its ``approval_denied`` outcome; a denied retry
    keeps its ``interrupted`` outcome. Each call is asked at most once per kind, so an
    approved call that turns out interrupted is asked again, about the retry.
    """
    outcomes = list(await executor.run(calls))
    asked: set[tuple[int, bool]] = set()
    while True:
        again: list[int] = []
        for index, outcome in enumerate(outcomes):
            request = outcome.approval
            if request is None or not _waits(outcome) or (index, request.retry) in asked:
                continue
            asked.add((index, request.retry))
            verdict = decide(outcome)
            if verdict.approved:
                executor.approve(outcome, by=verdict.by)
            elif request.retry:
                continue  # not retried: the interrupted error is its answer
            else:
                executor.deny(outcome, verdict.reason)
            again.append(index)
        if not again:
            return outcomes
        rerun = await executor.run([outcomes[i].call for i in again])
        for index, outcome in zip(again, rerun, strict=True):
            outcomes[index] = outcome


def decider(yes: bool) -> Decide:
    """``--yes`` approves every call that asks; a terminal is asked; without one, calls
    are denied. A retry of an interrupted call is never approved by ``--yes``: the call
    may have partly run, so a person checks its effects first (at a terminal)."""
    interactive = sys.stdin.isatty()

    def decide(outcome: ToolOutcome) -> Verdict:
        retry = outcome.approval is not None and outcome.approval.retry
        if yes and not retry:
            return Verdict(True, by=BY_YES_FLAG)
        if not interactive:
            return Verdict(False, RETRY_NOT_ASKED if retry else NON_INTERACTIVE_DENIAL)
        return _ask(outcome)

    return decide


def _ask(outcome: ToolOutcome) -> Verdict:
    request = outcome.approval
    arguments = request.arguments if request is not None else {}
    shown = escape_invisible(
        json.dumps(arguments, indent=2, ensure_ascii=False, default=json_default)
    )
    if request is not None and request.retry:
        err.print(
            f"tool {outcome.call.name!r} was interrupted before it finished (it may have "
            "partly run); its arguments:",
            markup=False,
        )
        err.print(shown, markup=False, highlight=False)
        question = RETRY_QUESTION
    else:
        err.print(f"tool {outcome.call.name!r} asks for approval to run with:", markup=False)
        err.print(shown, markup=False, highlight=False)
        question = "Run it?"
    if confirm(question):  # Ctrl-C ends the wait at any moment (exit 130)
        return Verdict(True, by=prompt_approver())
    return Verdict(False, "the user refused it at the prompt")
