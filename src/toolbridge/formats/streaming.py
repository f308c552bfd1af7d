"""Streamed tool calls: one assembler for every provider, plus thin event adapters.

Providers stream a call in pieces: an opening event with the id and name, argument
text split anywhere (inside a key, inside a ``\\u`` escape, between the two halves of
a surrogate pair) and a closing event. `ToolCallAssembler` keeps one buffer per call,
keyed by the provider's index or id, appends fragments to a list and joins them once
when the call is finished, so the total work is linear in the size of the stream.

Argument text is never repaired: it goes as is into `ToolCallRequest.arguments`, and
the registry decodes it strictly (and says so when it was cut off). The adapters turn
one provider's events into assembler steps: `feed(event)` returns the calls that event
finished, `close()` the ones still open when the stream ends.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from toolbridge.calls import ToolCallRequest
from toolbridge.formats.call_ids import generated_call_id

__all__ = [
    "STREAM_FORMATS",
    "AnthropicStream",
    "BedrockStream",
    "GeminiStream",
    "OllamaStream",
    "OpenAIChatStream",
    "OpenAIResponsesStream",
    "StreamAdapter",
    "StreamResult",
    "ToolCallAssembler",
    "assemble",
    "stream_adapter",
]

logger = logging.getLogger(__name__)


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


def _as_mapping(event: Any) -> Mapping[str, Any]:
    """A stream event as wire-shaped JSON: dicts as they are, SDK models dumped by alias."""
    if isinstance(event, Mapping):
        return event
    dump = getattr(event, "model_dump", None)
    if callable(dump):
        dumped = dump(mode="json", by_alias=True, exclude_none=True)
        if isinstance(dumped, Mapping):
            return dumped
    raise TypeError(
        f"expected a stream event as a dict (the provider's JSON) or an SDK model, "
        f"got {type(event).__name__}"
    )


@dataclass(frozen=True, slots=True)
class StreamResult:
    """Everything a finished stream said: assistant text, calls in start order, and why
    it stopped (the provider's own word, which may be ``stop`` although calls were made)."""

    text: str
    calls: tuple[ToolCallRequest, ...]
    finish_reason: str | None


@dataclass(slots=True)
class _Buffer:
    position: int
    call_id: str | None
    name: str
    extra: dict[str, Any]
    whole_arguments: Any = None  # arguments that arrived already decoded, in one piece
    fragments: list[str] = field(default_factory=list)


class ToolCallAssembler:
    """Per-call buffers keyed by the provider's index or id; finished calls come out as
    `ToolCallRequest`s. Text deltas accumulate alongside.

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

    def add_text(self, fragment: str) -> None:
        self._text.append(fragment)

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

    def result(self) -> StreamResult:
        """Close the stream and return its text, every call in start order and the reason."""
        self.close()
        calls = tuple(call for _, call in sorted(self._finished, key=lambda item: item[0]))
        return StreamResult(self.text, calls, self.finish_reason)

    def _buffer(self, key: Hashable) -> _Buffer:
        buffer = self._open.get(key)
        if buffer is None:
            raise KeyError(f"no open tool call under {key!r}; open() it first")
        return buffer


class OpenAIChatStream(ToolCallAssembler):
    """OpenAI Chat Completions chunks: ``choices[].delta.tool_calls[]`` fragments.

    Only choice `choice` is followed. A fragment's index keys its call; a new id under
    an index that is still open starts the next call; a fragment without an index
    continues the latest call unless it brings a new id. Any finish reason (``stop``
    included) closes the open calls.
    """

    def __init__(self, *, choice: int = 0, id_salt: str = "") -> None:
        super().__init__(id_salt=id_salt)
        self._choice = choice

    def feed(self, chunk: Any) -> list[ToolCallRequest]:
        finished: list[ToolCallRequest] = []
        for choice in _as_mapping(chunk).get("choices") or ():
            if choice.get("index", 0) != self._choice:
                continue
            delta = choice.get("delta") or {}
            if delta.get("content"):
                self.add_text(delta["content"])
            for fragment in delta.get("tool_calls") or ():
                finished.extend(self._fragment(fragment))
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
                finished.extend(self.finish_all())
        return finished

    def _fragment(self, fragment: Mapping[str, Any]) -> list[ToolCallRequest]:
        call_id = fragment.get("id") or None
        function = fragment.get("function") or {}
        name = function.get("name") or ""
        arguments = function.get("arguments")
        index = fragment.get("index")
        last = (
            self._last_key if self._last_key is not None and self.is_open(self._last_key) else None
        )
        if index is not None:
            key: Hashable = ("index", index)
            # a server that leaves the index out of the first fragment only
            if (
                last is not None
                and isinstance(last, tuple)
                and last[0] == "unindexed"
                and not self.is_open(key)
                and (call_id is None or self._open[last].call_id in (None, call_id))
            ):
                self.rekey(last, key)
        elif last is not None:
            key = last
        else:
            key = ("unindexed", self.calls_started)

        finished: list[ToolCallRequest] = []
        current = self._open.get(key)
        if current is not None and call_id is not None and current.call_id not in (None, call_id):
            if index is None:
                key = ("unindexed", self.calls_started)
            current = None
        elif (
            current is not None
            and index is None
            and name
            and current.name
            and name != current.name
            and current.fragments
        ):
            # no index and no id: another name after a call that has its arguments is
            # the next call (servers that send whole calls one per chunk)
            key, current = ("unindexed", self.calls_started), None
        if current is None:
            finished = self.open(key, call_id=call_id, name=name)
        else:
            if name and name != current.name:
                # Some servers resend the whole name in every fragment; others split it.
                self.add_name(key, name)
            current.call_id = current.call_id or call_id
        if isinstance(arguments, str):
            if arguments:
                self.add_arguments(key, arguments)
        elif arguments is not None:  # a server that sends the decoded object
            self._open[key].whole_arguments = arguments
        return finished


class OpenAIResponsesStream(ToolCallAssembler):
    """OpenAI Responses events: ``response.output_item.added``, argument deltas and
    ``.done``, ``response.output_item.done``. The call id is ``call_id``; the item ``id``
    is kept in ``extra["item_id"]``."""

    def __init__(self, *, id_salt: str = "") -> None:
        super().__init__(id_salt=id_salt)
        self._key_by_output_index: dict[Any, Hashable] = {}

    def feed(self, event: Any) -> list[ToolCallRequest]:
        data = _as_mapping(event)
        kind = data.get("type")
        if kind == "response.output_text.delta":
            self.add_text(data.get("delta") or "")
        elif kind == "response.output_item.added":
            return self._item(data, done=False)
        elif kind in (
            "response.function_call_arguments.delta",
            "response.custom_tool_call_input.delta",
        ):
            key = self._key(data)
            if not self.is_open(key):
                self.open(key, extra=_item_extra(data.get("item_id")))
            self.add_arguments(key, data.get("delta") or "")
        elif kind in (
            "response.function_call_arguments.done",
            "response.custom_tool_call_input.done",
        ):
            key = self._key(data)
            whole = data.get("arguments", data.get("input"))
            if self.is_open(key) and isinstance(whole, str):
                self.set_arguments(key, whole)
        elif kind == "response.output_item.done":
            return self._item(data, done=True)
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            response = data.get("response") or {}
            details = response.get("incomplete_details") or {}
            self.finish_reason = details.get("reason") or response.get("status") or kind
            return self.finish_all()
        return []

    def _item(self, data: Mapping[str, Any], *, done: bool) -> list[ToolCallRequest]:
        item = data.get("item") or {}
        kind = item.get("type")
        if kind not in ("function_call", "custom_tool_call"):
            return []
        key = self._key({"item_id": item.get("id"), "output_index": data.get("output_index")})
        finished: list[ToolCallRequest] = []
        if not self.is_open(key):
            finished = self.open(key, extra=_item_extra(item.get("id")))
        buffer = self._open[key]
        buffer.call_id = item.get("call_id") or buffer.call_id
        buffer.name = item.get("name") or buffer.name
        if kind == "custom_tool_call":  # free-form input, as the whole-response parser keeps it
            buffer.extra["type"] = "custom"
        arguments = item.get("arguments" if kind == "function_call" else "input")
        if isinstance(arguments, str) and (done or arguments):
            self.set_arguments(key, arguments)
        if done:
            finished.append(self.finish(key))
        return finished

    def _key(self, data: Mapping[str, Any]) -> Hashable:
        output_index = data.get("output_index")
        item_id = data.get("item_id")
        key: Hashable = ("item", item_id) if item_id else ("output", output_index)
        if output_index is not None:
            key = self._key_by_output_index.setdefault(output_index, key)
        return key


def _item_extra(item_id: Any) -> dict[str, Any]:
    return {"item_id": item_id} if item_id else {}


class AnthropicStream(ToolCallAssembler):
    """Anthropic Messages events: a ``tool_use`` block start, ``input_json_delta``
    fragments, and the block stop that finishes the call."""

    def feed(self, event: Any) -> list[ToolCallRequest]:
        data = _as_mapping(event)
        kind = data.get("type")
        index = data.get("index")
        if kind == "content_block_start":
            block = data.get("content_block") or {}
            if block.get("type") == "tool_use":
                return self.open(
                    index,
                    call_id=block.get("id") or None,
                    name=block.get("name") or "",
                    arguments=block.get("input") or None,
                )
            if block.get("type") == "text" and block.get("text"):
                self.add_text(block["text"])
        elif kind == "content_block_delta":
            delta = data.get("delta") or {}
            if delta.get("type") == "text_delta":
                self.add_text(delta.get("text") or "")
            elif delta.get("type") == "input_json_delta" and self.is_open(index):
                self.add_arguments(index, delta.get("partial_json") or "")
        elif kind == "content_block_stop" and self.is_open(index):
            return [self.finish(index)]
        elif kind == "message_delta":
            reason = (data.get("delta") or {}).get("stop_reason")
            self.finish_reason = reason or self.finish_reason
        elif kind == "message_stop":
            return self.finish_all()
        return []


class GeminiStream(ToolCallAssembler):
    """Gemini ``streamGenerateContent`` chunks: each ``functionCall`` part arrives whole.

    A part's thought signature is kept in ``extra["thought_signature"]``; it must be
    sent back with the call. Gemini says ``STOP`` whether or not it called tools.
    """

    def feed(self, chunk: Any) -> list[ToolCallRequest]:
        finished: list[ToolCallRequest] = []
        candidates = _as_mapping(chunk).get("candidates") or ()
        for candidate in candidates[:1]:
            for part in (candidate.get("content") or {}).get("parts") or ():
                call = _either(part, "functionCall", "function_call")
                if call:
                    signature = _either(part, "thoughtSignature", "thought_signature")
                    finished.append(
                        self.add_whole_call(
                            call_id=call.get("id") or None,
                            name=call.get("name") or "",
                            arguments=call.get("args") or {},
                            extra={"thought_signature": signature} if signature else {},
                        )
                    )
                elif part.get("text") and not part.get("thought"):
                    self.add_text(part["text"])
            reason = _either(candidate, "finishReason", "finish_reason")
            if reason:
                self.finish_reason = reason
                finished.extend(self.finish_all())
        return finished


def _either(data: Mapping[str, Any], camel: str, snake: str) -> Any:
    """REST JSON uses camelCase, the google-genai SDK's dicts use snake_case."""
    value = data.get(camel)
    return value if value is not None else data.get(snake)


class OllamaStream(ToolCallAssembler):
    """Ollama ``/api/chat`` stream lines: whole ``message.tool_calls`` per chunk, ``done``
    with ``done_reason`` at the end."""

    def feed(self, chunk: Any) -> list[ToolCallRequest]:
        data = _as_mapping(chunk)
        message = data.get("message") or {}
        if message.get("content"):
            self.add_text(message["content"])
        finished = [
            self.add_whole_call(
                call_id=call.get("id") or None,
                name=(call.get("function") or {}).get("name") or "",
                arguments=(call.get("function") or {}).get("arguments"),
            )
            for call in message.get("tool_calls") or ()
        ]
        if data.get("done"):
            self.finish_reason = data.get("done_reason") or "stop"
            finished.extend(self.finish_all())
        return finished


class BedrockStream(ToolCallAssembler):
    """Bedrock ConverseStream events: ``contentBlockStart.start.toolUse``,
    ``contentBlockDelta.delta.toolUse.input`` fragments, ``contentBlockStop``."""

    def feed(self, event: Any) -> list[ToolCallRequest]:
        data = _as_mapping(event)
        if "contentBlockStart" in data:
            start = data["contentBlockStart"]
            tool_use = (start.get("start") or {}).get("toolUse")
            if tool_use:
                return self.open(
                    start.get("contentBlockIndex"),
                    call_id=tool_use.get("toolUseId") or None,
                    name=tool_use.get("name") or "",
                )
        elif "contentBlockDelta" in data:
            body = data["contentBlockDelta"]
            delta = body.get("delta") or {}
            index = body.get("contentBlockIndex")
            if delta.get("text"):
                self.add_text(delta["text"])
            elif "toolUse" in delta and self.is_open(index):
                self.add_arguments(index, delta["toolUse"].get("input") or "")
        elif "contentBlockStop" in data:
            index = data["contentBlockStop"].get("contentBlockIndex")
            if self.is_open(index):
                return [self.finish(index)]
        elif "messageStop" in data:
            self.finish_reason = data["messageStop"].get("stopReason")
            return self.finish_all()
        return []


StreamAdapter = (
    OpenAIChatStream
    | OpenAIResponsesStream
    | AnthropicStream
    | GeminiStream
    | OllamaStream
    | BedrockStream
)

STREAM_FORMATS: Mapping[str, Callable[..., StreamAdapter]] = MappingProxyType(
    {
        "openai_chat": OpenAIChatStream,
        "openai_responses": OpenAIResponsesStream,
        "anthropic": AnthropicStream,
        "gemini": GeminiStream,
        "ollama": OllamaStream,
        "bedrock": BedrockStream,
    }
)


def stream_adapter(format: str, *, id_salt: str = "") -> StreamAdapter:
    """A fresh adapter for a provider format name (the names of `toolbridge.formats`)."""
    factory = STREAM_FORMATS.get(format)
    if factory is None:
        known = ", ".join(STREAM_FORMATS)
        raise ValueError(f"unknown stream format {format!r}; use one of: {known}")
    return factory(id_salt=id_salt)


def assemble(format: str, events: Iterable[Any], *, id_salt: str = "") -> StreamResult:
    """Feed a whole recorded stream through the format's adapter and return the result."""
    adapter = stream_adapter(format, id_salt=id_salt)
    for event in events:
        adapter.feed(event)
    return adapter.result()
