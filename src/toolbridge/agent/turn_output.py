"""What a model turn produced, and whether the run ends there.

After the model's message: a turn cut off by the output limit, or over the tool-call
budget, stops the run once its calls that will not run are answered (so the history
stays valid to send again); a turn without calls is the answer. Under an output type,
`AnswerCheck` takes the structured answer from the text or from a ``final_result`` call,
or tells the model what was wrong and lets it try again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from toolbridge.agent.messages import AssistantMessage, ToolResultsMessage, ToolReturn, UserMessage
from toolbridge.agent.output import OutputSpec
from toolbridge.agent.run_context import RunContext
from toolbridge.agent.state import StopReason
from toolbridge.core.calls import ToolCallRequest
from toolbridge.core.errors import ErrorKind, ToolError
from toolbridge.core.tool import ToolResult
from toolbridge.execution.outcomes import ToolOutcome

__all__ = ["AnswerCheck", "after_turn"]


def _not_run(call: ToolCallRequest, message: str, hint: str) -> ToolReturn:
    """A result for a call the runner did not hand to the executor (cut off, budget)."""
    error = ToolError(ErrorKind.CANCELLED, message, hint)
    return ToolReturn(call, ToolResult.error(error))


class AnswerCheck:
    """The run's structured answer under `spec`: from a text answer (JSON of the type; asked
    for natively when `native`) or a ``final_result`` call; a failed one is told to the
    model, which gets `retries` more tries."""

    def __init__(self, spec: OutputSpec, *, native: bool, retries: int) -> None:
        self.spec = spec
        self.native = native
        self.retries = retries

    def text_answer(self, run: RunContext, message: AssistantMessage) -> StopReason | None:
        """With an output type, a text answer must be JSON of that type; else the model is
        told what was wrong and asked again (None continues the run)."""
        value, problem = self.spec.from_text(message.text, native=self.native)
        if problem is None:
            run.output_value = value
            return StopReason.FINAL
        return self.failed(run, problem)

    def failed(self, run: RunContext, problem: str | None) -> StopReason | None:
        run.output_failures += 1
        if run.output_failures > self.retries:
            return StopReason.OUTPUT_INVALID
        if problem is not None:
            run.conversation.append(UserMessage(f"Error: {problem}."))
        return None

    def final_result(self, run: RunContext, results: Sequence[ToolReturn]) -> StopReason | None:
        """Whether this turn's ``final_result`` call (if any) ends the run."""
        spec = self.spec
        finals = [ret for ret in results if ret.call.name == spec.tool_name]
        if not finals:
            return None
        for ret in reversed(finals):
            if not ret.result.is_error:
                try:
                    run.output_value = spec.from_call(ret.call)
                except ValueError:
                    continue
                return StopReason.FINAL
        return self.failed(run, None)  # the error result already says what is wrong


def after_turn(
    run: RunContext,
    message: AssistantMessage,
    ran: Mapping[str, ToolOutcome],
    *,
    max_tool_calls: int | None,
    answers: AnswerCheck | None,
) -> StopReason | None:
    """Decide what the turn's calls may do: None runs them; a reason stops the run
    (after answering the calls that will not run, so the history stays valid)."""
    state = run.state
    calls = message.calls
    if message.truncated:
        if calls:
            state.tool_calls += len(ran)
            state.conversation.append(
                ToolResultsMessage(
                    tuple(
                        ToolReturn(call, ran[call.id].result)
                        if call.id in ran  # complete, started early (eager_tools)
                        else _not_run(
                            call,
                            "not run: the response was cut off by the output token limit "
                            "before this call was complete",
                            "Write a shorter call, or split the work into smaller calls.",
                        )
                        for call in calls
                    )
                )
            )
        return StopReason.MAX_TOKENS
    if not calls:
        return answers.text_answer(run, message) if answers is not None else StopReason.FINAL
    limit = max_tool_calls
    if limit is not None and state.tool_calls + len(calls) > limit:
        state.conversation.append(
            ToolResultsMessage(
                tuple(
                    _not_run(
                        call,
                        f"not run: the run's budget of {limit} tool calls is spent",
                        "Answer with what you have.",
                    )
                    for call in calls
                )
            )
        )
        return StopReason.MAX_TOOL_CALLS
    return None
