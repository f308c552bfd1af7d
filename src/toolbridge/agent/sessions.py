"""Where a run's state comes from: a prompt, a conversation or a `RunState` given, or,
with a `CallJournal`, the run stored under the session's name.

With a journal a prompt joins the session's stored run (it waits in `RunState.prompts`
until the last turn is answered) and no input resumes that run as it stands; a stored
run that cannot be read is an error that names the session, never a fresh start. The
run saves itself back (`RunContext.save`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from toolbridge.agent.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResultsMessage,
    UserMessage,
)
from toolbridge.agent.state import RunState

if TYPE_CHECKING:
    from toolbridge.journal import CallJournal

__all__ = ["RunInput", "initial_state", "start_state"]

RunInput = str | Sequence[Message] | RunState


async def start_state(
    journal: CallJournal | None, input: RunInput | None, session: str
) -> RunState:
    """The state a run starts from: with a journal, a prompt joins the session's stored
    run (once its last turn is answered) and None resumes that run as it stands."""
    stored = None
    if journal is not None and (input is None or isinstance(input, str)):
        data = await journal.load_run(session)
        try:
            stored = RunState.from_json(data) if data is not None else None
        except ValueError as exc:
            raise ValueError(
                f"the run stored for session {session!r} cannot be resumed ({exc}); "
                "go on under another session name"
            ) from None
    if input is None:
        if journal is None:
            raise ValueError(
                "input is None: give a prompt, a conversation or a RunState (None "
                "resumes a session's stored run, with journal=)"
            )
        if stored is None:
            raise ValueError(f"nothing to resume: no run is stored for session {session!r}")
        last = stored.conversation[-1] if stored.conversation else None
        if isinstance(last, AssistantMessage) and not last.calls:
            raise ValueError(
                f"the run of session {session!r} ended with the model's answer: there is "
                "nothing to resume; send a prompt to go on"
            )
        return stored
    if isinstance(input, str) and stored is not None:
        stored.prompts.append(input)
        return stored
    return initial_state(input)


def initial_state(input: RunInput) -> RunState:
    """The state of a run that starts from `input` itself (a copy of a `RunState`)."""
    if isinstance(input, RunState):
        return input.copy()
    if isinstance(input, str):
        return RunState([UserMessage(input)])
    conversation = list(input)
    for message in conversation:
        if not isinstance(
            message, SystemMessage | UserMessage | AssistantMessage | ToolResultsMessage
        ):
            raise TypeError(
                "a conversation is a list of SystemMessage, UserMessage, AssistantMessage "
                f"and ToolResultsMessage, got {type(message).__name__}"
            )
    return RunState(conversation)
