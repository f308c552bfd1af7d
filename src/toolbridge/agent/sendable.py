"""The conversation as a provider can be sent it: no lone surrogate anywhere.

JSON lets a model send ``"\\udc80"``, and a file name decoded with ``surrogateescape``
holds one too: a Python string with a lone surrogate, which UTF-8 cannot encode. In the
history (a tool name, arguments, an answer, a result) it made every later request
fail to encode, which ended the run. The calls themselves run as the model sent them
(the registry refuses such arguments with an error the model reads); only what is
sent back is changed: each surrogate becomes the six characters ``\\udc80``.

The escaping itself is `toolbridge.core.sendable`'s, which the tools' definitions go
through too; this module keeps the conversation's turn-by-turn bookkeeping.
"""

from __future__ import annotations

from toolbridge.agent.messages import Message
from toolbridge.core.sendable import sendable, sendable_text

__all__ = ["Sendable", "sendable_text"]


class Sendable:
    """One run's conversation made sendable turn by turn: each turn checks only the
    messages added since the last (as `RenderCache` renders them), unless the list was
    changed before them; then all again."""

    def __init__(self) -> None:
        self._checked = 0
        self._last: Message | None = None

    def __call__(self, messages: list[Message]) -> list[Message]:
        """`messages` with every lone surrogate escaped, in place (an escaped message
        stays the same object from then on: the adapters' render cache keeps it)."""
        start = self._checked
        if start > len(messages) or (start and messages[start - 1] is not self._last):
            start = 0
        for index in range(start, len(messages)):
            try:
                escaped = sendable(messages[index])
            except RecursionError:  # nested past Python's limit: sent as it is (the
                continue  # provider's SDK reports what it cannot encode)
            messages[index] = escaped
        self._checked = len(messages)
        self._last = messages[-1] if messages else None
        return messages
