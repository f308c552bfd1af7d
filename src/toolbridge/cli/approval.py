"""Run calls through the executor and settle the ones that wait for approval.

One path for every call: `ToolExecutor.run`, so a tool's timeout, approval rule, loop
guard and result cap hold on the command line exactly as in a program. Calls pending
approval are decided here (``--yes``, a y/n prompt on a terminal, or denied when
nobody can be asked) and sent again.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence

import typer

from toolbridge.calls import ToolCallRequest
from toolbridge.cli.app import err
from toolbridge.executor import OutcomeStatus, ToolExecutor, ToolOutcome
from toolbridge.jsontext import json_default
from toolbridge.terminal import escape_invisible

__all__ = ["NON_INTERACTIVE_DENIAL", "Decide", "decider", "run_calls"]

NON_INTERACTIVE_DENIAL = (
    "toolbridge ran without a terminal, so nobody could approve it; "
    "run it again with --yes to approve such calls"
)

Decide = Callable[[ToolOutcome], tuple[bool, str]]
"""Given a pending outcome: (approved, reason for a denial)."""


async def run_calls(
    executor: ToolExecutor, calls: Sequence[ToolCallRequest], decide: Decide
) -> list[ToolOutcome]:
    """Run `calls`; decide each pending approval, then run those calls again, in order."""
    outcomes = await executor.run(calls)
    pending = [i for i, o in enumerate(outcomes) if o.status is OutcomeStatus.PENDING_APPROVAL]
    if not pending:
        return outcomes
    for index in pending:
        approved, reason = decide(outcomes[index])
        if approved:
            executor.approve(outcomes[index])
        else:
            executor.deny(outcomes[index], reason)
    again = await executor.run([outcomes[i].call for i in pending])
    for index, outcome in zip(pending, again, strict=True):
        outcomes[index] = outcome
    return outcomes


def decider(yes: bool) -> Decide:
    """``--yes`` approves all; a terminal is asked; without one, every call is denied."""
    if yes:
        return lambda outcome: (True, "")
    if not sys.stdin.isatty():
        return lambda outcome: (False, NON_INTERACTIVE_DENIAL)
    return _ask


def _ask(outcome: ToolOutcome) -> tuple[bool, str]:
    request = outcome.approval
    arguments = request.arguments if request is not None else {}
    shown = escape_invisible(
        json.dumps(arguments, indent=2, ensure_ascii=False, default=json_default)
    )
    err.print(f"tool {outcome.call.name!r} asks for approval to run with:", markup=False)
    err.print(shown, markup=False, highlight=False)
    approved = typer.confirm("Run it?", default=False, err=True)
    return approved, "" if approved else "the user refused it at the prompt"
