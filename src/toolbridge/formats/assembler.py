"""Streamed tool calls: the provider-free assembler every stream adapter builds on.

Providers stream a call in pieces: an opening event with the id and name, argument
text split anywhere (inside a key, inside a ``\\u`` escape, between the two halves of
a surrogate pair) and a closing event. `ToolCallAssembler` keeps one buffer per call,
keyed by the provider's index or id, appends fragments to a list and joins them once
when the call is finished, so the total work is linear in the size of the stream.

Argument text is never repaired: it goes as is into `ToolCallRequest.arguments`, and
the registry decodes it strictly (and says so when it was cut off). Each provider
module has a `StreamAdapter` subclass that turns its events into assembler steps:
`feed(event)` returns the calls that event finished, `close()` the ones still open
when the stream ends, `result()` everything the stream said.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from toolbridge.core.calls import ToolCallRequest
from toolbridge.formats.call_ids import generated_call_id
from toolbridge.formats.types import FormatError, ParsedResponse, TurnPart
from toolbridge.formats.wire import check_depth, dumped, json_type, load_json

__all__ = [
    "DONE",
    "StreamAdapter",
    "StreamResult",
    "ToolCallAssembler",
    "stream_event",
]

logger = logging.getLogger(__name__)

DONE = "[DONE]"
"""OpenAI's end-of-stream sentinel (the last ``data:`` line of a server-sent stream)."""


def _is_high_surrogate(char: str) -> bool:
    return "\ud800" <= char <= "\udbff"


def _join(fragments: list[str]) -> str:
    """Join fragments once; pair up surrogate halves that arrived in separate events.

    A pair can only be split where one fragment ends, so only fragment ends are checked.
    """
    text = "".join(fragments)
    if any(fragment and _is_high_surrogate(fragment[-1]) for fragment in fragments):
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return text


def stream_event(event: Any) -> Mapping[str, Any] | None:
    """One stream event as wire-shaped JSON, or None for the ``"[DONE]"`` sentinel.

    Takes a dict, an SDK model (dumped by alias) or the JSON text of one event (an SSE
    ``data:`` payload). Anything else, or an event nested deeper than the readers
    allow, is a `FormatError`.
    """
    if type(event) is dict:  # the common case: check nothing but the nesting
        check_depth(event, "a stream event")
        return event
    if isinstance(event, bytes | bytearray):
        event = event.decode("utf-8", "replace")
    if isinstance(event, str):
        text = event.strip()
        if text.startswith("data:"):
            text = text[5:].strip()
        if text == DONE:
            return None
        event = load_json(text, "a stream event")
    else:
        event = dumped(event)
        check_depth(event, "a stream event")
    if not isinstance(event, Mapping):
        raise FormatError(
            "expected a stream event as a dict (the provider's JSON), its JSON text or an "
            f"SDK model, got {json_type(event)}"
        )
    return event


@dataclass(frozen=True, slots=True)
class StreamResult:
    """Everything a finished stream said: assistant text, calls in start order, and why
    it stopped (the provider's own word, which may be ``stop`` although calls were made).

    `parts` is the turn in order with the provider-opaque items (thinking blocks,
    reasoning items, signatures), as in `ParsedResponse.parts`; `truncated` is True
    when the provider said the output was cut off.
    """

    text: str
    calls: tuple[ToolCallRequest, ...]
    finish_reason: str | None
    parts: tuple[TurnPart, ...] = ()
    truncated: bool = False

    def parsed(self, raw: Any = None) -> ParsedResponse:
        """The same turn as a `ParsedResponse`, as the whole-response parsers give it."""
        return ParsedResponse(
            text=self.text,
            calls=self.calls,
            finish_reason=self.finish_reason,
            truncated=self.truncated,
            raw=raw,
            parts=self.parts,
        )


@dataclass(slots=True)
class _Buffer:
    position: int
    call_id: str | None
    name: str
    extra: dict[str, Any]
    whole_arguments: Any = None  # arguments that arrived already decoded, in one piece
    fragments: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _TextRun:
    fragments: list[str]
    extra: dict[str, Any]


class ToolCallAssembler:
    """Per-call buffers keyed by the provider's index or id; finished calls come out as
    `ToolCallRequest`s. Text deltas and opaque items accumulate alongside, in order.

    Calls without an id get a stable generated one (see `generated_call_id`) and
    ``extra["generated_id"] = True``, like the whole-response parsers; pass
    `id_salt` (the response id, the turn number) to keep identical calls of different
    turns apart.
    """

    def __init__(self, *, id_salt: str = "") -> None:
        self.finish_reason: str | None = None
        self._id_salt = id_salt
        self._open: dict[Hashable, _Buffer] = {}
        self._finished: list[tuple[int, ToolCallRequest]] = []
        self._text: list[str] = []
        self._order: list[_TextRun | int | dict[str, Any]] = []  # text, call position, opaque
        self._started = 0
        self._last_key: Hashable | None = None

    # --- building calls ----------------------------------------------------------------

    def open(
        self,
        key: Hashable,
        *,
        call_id: str | None = None,
        name: str = "",
        arguments: Any = None,
        extra: Mapping[str, Any] | None = None,
    ) -> list[ToolCallRequest]:
        """Start a call under `key`. A call still open under the same key is finished
        first and returned: providers reuse index 0 for the next call with a new id.

        `arguments` is for providers that send them whole and decoded (Gemini, Ollama);
        argument text that arrives later replaces it.
        """
        finished = [self.finish(key)] if key in self._open else []
        self._open[key] = _Buffer(self._started, call_id, name, dict(extra or {}), arguments)
        self._order.append(self._started)
        self._started += 1
        self._last_key = key
        return finished

    def rekey(self, old: Hashable, new: Hashable) -> None:
        """File the open call under `old` under `new` from now on."""
        self._open[new] = self._open.pop(old)
        if self._last_key == old:
            self._last_key = new

    def add_name(self, key: Hashable, fragment: str) -> None:
        self._buffer(key).name += fragment

    def add_arguments(self, key: Hashable, fragment: str) -> None:
        """Append one fragment of argument text. O(1): nothing is parsed here."""
        self._buffer(key).fragments.append(fragment)

    def set_arguments(self, key: Hashable, text: str) -> None:
        """Replace the argument text with the provider's own complete copy."""
        self._buffer(key).fragments = [text]

    def finish(self, key: Hashable) -> ToolCallRequest:
        """Close the call under `key` and return it; its argument text is joined here, once."""
        buffer = self._open.pop(key, None)
        if buffer is None:
            raise KeyError(f"no open tool call under {key!r}; open() it first")
        arguments = _join(buffer.fragments) if buffer.fragments else buffer.whole_arguments
        if arguments is None:
            arguments = ""
        call_id = buffer.call_id
        if not call_id:
            call_id = generated_call_id(buffer.position, buffer.name, arguments, salt=self._id_salt)
            buffer.extra["generated_id"] = True
        if not buffer.name:
            logger.warning("streamed tool call %s finished without a name", call_id)
        call = ToolCallRequest(call_id, buffer.name, arguments, buffer.extra)
        self._finished.append((buffer.position, call))
        return call

    def finish_all(self) -> list[ToolCallRequest]:
        """Close every open call, in the order they started."""
        keys = sorted(self._open, key=lambda k: self._open[k].position)
        return [self.finish(key) for key in keys]

    def add_whole_call(
        self,
        *,
        call_id: str | None,
        name: str,
        arguments: Any,
        extra: Mapping[str, Any] | None = None,
    ) -> ToolCallRequest:
        """Record a call that arrived complete in one event (Gemini, Ollama)."""
        key = ("whole", self.calls_started)
        self.open(key, call_id=call_id, name=name, arguments=arguments, extra=extra)
        return self.finish(key)

    def add_text(self, fragment: str, extra: Mapping[str, Any] | None = None) -> None:
        """Append assistant text; `extra` (wire keys replayed with the text, such as a
        thought signature) starts a text part of its own."""
        self._text.append(fragment)
        last = self._order[-1] if self._order else None
        if isinstance(last, _TextRun) and not extra and not last.extra:
            last.fragments.append(fragment)
        else:
            self._order.append(_TextRun([fragment], dict(extra or {})))

    def add_opaque(self, item: dict[str, Any]) -> None:
        """Record a provider item to send back as is (a thinking block, a reasoning
        item), at this point of the turn. The dict may still be filled in until the
        stream ends (a thinking block whose text is still arriving)."""
        self._order.append(item)

    # --- reading -------------------------------------------------------------------------

    def is_open(self, key: Hashable) -> bool:
        return key in self._open

    @property
    def calls_started(self) -> int:
        return self._started

    @property
    def text(self) -> str:
        """The assistant text so far (joined on each read; read it when you need it)."""
        return _join(self._text)

    def preview(self, key: Hashable) -> Any:
        """The arguments of an open call as far as they have arrived, for display only.

        Uses jiter's partial mode (``"trailing-strings"``): an unfinished string shows
        its prefix. One pass over the call's text per request, so ask when you render,
        not for every chunk. Returns None before any argument arrived; raises ValueError
        when the text so far cannot be the start of JSON.
        """
        buffer = self._buffer(key)
        if not buffer.fragments:
            return buffer.whole_arguments
        text = _join(buffer.fragments)
        buffer.fragments = [text]  # later joins start from one piece
        if not text.strip():
            return None
        if _is_high_surrogate(text[-1]):
            text = text[:-1]  # half of a pair whose other half has not arrived yet
        import jiter

        return jiter.from_json(text.encode("utf-8", "replace"), partial_mode="trailing-strings")

    def close(self) -> list[ToolCallRequest]:
        """End of stream: close the calls still open (the stream may have been cut off)."""
        return self.finish_all()

    def truncated(self) -> bool:
        """Whether the provider said the output was cut off (see `StreamAdapter`)."""
        return False

    def result(self) -> StreamResult:
        """Close the stream and return its text, every call in start order, the reason
        and the turn's parts in order."""
        self.close()
        ordered = sorted(self._finished, key=lambda item: item[0])
        index_of = {position: index for index, (position, _) in enumerate(ordered)}
        parts: list[TurnPart] = []
        for entry in self._order:
            if isinstance(entry, _TextRun):
                parts.append(TurnPart("text", _join(entry.fragments), entry.extra))
            elif isinstance(entry, int):
                if entry in index_of:
                    parts.append(TurnPart("call", index_of[entry]))
            else:
                parts.append(TurnPart("opaque", entry))
        calls = tuple(call for _, call in ordered)
        return StreamResult(self.text, calls, self.finish_reason, tuple(parts), self.truncated())

    def _buffer(self, key: Hashable) -> _Buffer:
        buffer = self._open.get(key)
        if buffer is None:
            raise KeyError(f"no open tool call under {key!r}; open() it first")
        return buffer


class StreamAdapter(ToolCallAssembler):
    """A provider's stream events -> assembler steps. Subclasses implement `_feed`.

    `feed` is the boundary: it takes a dict, an SDK model or an event's JSON text,
    treats OpenAI's ``"[DONE]"`` sentinel as the end of the stream, and raises only
    `FormatError` for an event of the wrong shape (the readers of
    `toolbridge.formats.wire` check every field the adapter uses).
    """

    TRUNCATION_REASONS: ClassVar[frozenset[str]] = frozenset()

    def feed(self, event: Any) -> list[ToolCallRequest]:
        """Take one event; return the calls it finished."""
        data = stream_event(event)
        if data is None:
            return self.finish_all()
        return self._feed(data)

    def _feed(self, data: Mapping[str, Any]) -> list[ToolCallRequest]:
        raise NotImplementedError

    def truncated(self) -> bool:
        return self.finish_reason in self.TRUNCATION_REASONS
