"""One model turn of a run: the adapter's stream read to its end, within the run's
deadline and under a ``chat {model}`` span.

The turn ends with the adapter's `ModelResponse`, or with None when the run's deadline
passed first; the adapter's stream is closed however the turn ends, and a model error
is recorded on the span before it is raised.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator

from toolbridge.agent.events import AgentEvent, ModelResponse
from toolbridge.agent.model import ModelAdapter, ModelRequest
from toolbridge.agent.run_context import RunContext

__all__ = ["model_turn"]

logger = logging.getLogger(__name__)


async def model_turn(
    run: RunContext, model: ModelAdapter, request: ModelRequest
) -> AsyncGenerator[AgentEvent | ModelResponse | None, None]:
    """The model's events for one turn; None when the deadline cut the turn off.

    With a deadline, each event is awaited with the time left, so the timeout never
    fires while the consumer holds an event.
    """
    turn = request.turn
    events = aiter(model.stream(request))
    tracer = run.tracer
    chat = None
    if tracer is not None:
        chat = tracer.start_chat(run.span, model.format, model.model)
    response: ModelResponse | None = None
    error: BaseException | None = None
    try:
        while True:
            remaining = run.remaining()
            try:
                if remaining is None:
                    event = await anext(events)
                else:
                    event = await asyncio.wait_for(anext(events), max(remaining, 0))
            except StopAsyncIteration:
                return
            except TimeoutError:
                left = run.remaining()
                if left is not None and left <= 0:
                    logger.info("run deadline reached during model turn %d", turn)
                    yield None
                    return
                raise
            if isinstance(event, ModelResponse):
                response = event
            yield event
    except BaseException as exc:  # recorded on the span, then re-raised
        if not isinstance(exc, GeneratorExit):  # the consumer stopped early
            error = exc
        raise
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()
        if tracer is not None:
            tracer.end(
                chat,
                response.usage if response is not None else None,
                finish_reason=response.message.finish_reason if response else None,
                error=error,
            )
