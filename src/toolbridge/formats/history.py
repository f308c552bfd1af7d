"""`repair_history`: make a stored history acceptable to a provider again, and say how.

The engine is provider-free (`toolbridge.formats.repair`); each provider module knows
its own history shape and has a ``repair_history(messages)``. This module picks the
provider by format name: ``openai_chat`` and ``ollama`` (messages),
``openai_responses`` (input items), ``anthropic`` and ``bedrock`` (messages of content
blocks) and ``gemini`` (``contents``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from toolbridge.formats import anthropic, bedrock, gemini, ollama, openai_chat, openai_responses
from toolbridge.formats.repair import MISSING_RESULT, Messages
from toolbridge.formats.types import FormatError, HistoryChange

__all__ = ["MISSING_RESULT", "repair_history"]

_REPAIRS = {
    "anthropic": anthropic.repair_history,
    "bedrock": bedrock.repair_history,
    "gemini": gemini.repair_history,
    "ollama": ollama.repair_history,
    "openai_chat": openai_chat.repair_history,
    "openai_responses": openai_responses.repair_history,
}


def repair_history(
    messages: Sequence[Mapping[str, Any]], format: str
) -> tuple[Messages, list[HistoryChange]]:
    """A repaired copy of `messages` in `format` and the list of what was changed.

    The input is never modified. Raises only `FormatError`: for an unknown format, and
    for a history that is not a list of message objects, nests deeper than
    `toolbridge.formats.wire.MAX_DEPTH`, or keeps its calls in something other than a
    list. A call id that is not a string is treated as missing (a new one is generated
    where the provider needs ids).
    """
    repair = _REPAIRS.get(format)
    if repair is None:
        raise FormatError(
            f"repair_history does not know the format {format!r}; use one of "
            + ", ".join(sorted(_REPAIRS))
        )
    return repair(messages)
