"""A scripted model server on 127.0.0.1 that speaks a provider's HTTP wire.

Each test queues `Reply`s (a JSON body, or server-sent events with the provider's real
framing) and the real SDK client talks to it over HTTP. Every request is recorded
(path, headers, JSON body) so the test checks what the SDK sent. A request with no
reply queued gets HTTP 500 and is recorded, so a test that under-scripts fails loudly.
Also provides builders for OpenAI chat chunks and Anthropic stream events.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import zlib
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted response: `json` as the body, `events` as an SSE stream of
    ``(event name or None, data)`` (data that is not a string is sent as JSON), or
    `lines` as NDJSON (one JSON object per line, Ollama's framing)."""

    status: int = 200
    json: Any = None
    events: Sequence[tuple[str | None, Any]] | None = None
    lines: Sequence[Any] | None = None
    frames: Sequence[bytes] | None = None
    """Binary frames sent one write each (Bedrock's application/vnd.amazon.eventstream)."""
    delay: float = 0.0
    """Seconds to wait after the first event (or line) before the rest."""
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class ScriptedServer:
    """A threaded HTTP server that answers requests from a queue of `Reply`s."""

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                with server._lock:
                    server.requests.append(
                        Recorded(
                            "POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body
                        )
                    )
                    reply = server.replies.popleft() if server.replies else None
                if reply is None:
                    reply = Reply(500, {"error": {"message": "no scripted reply left"}})
                try:
                    self._send(reply)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the client hung up (a cut-off stream)

            def _send(self, reply: Reply) -> None:
                if reply.lines is not None or reply.frames is not None:
                    if reply.frames is not None:
                        frames = list(reply.frames)
                        kind = "application/vnd.amazon.eventstream"
                    else:
                        frames = [(json.dumps(line) + "\n").encode() for line in reply.lines or ()]
                        kind = "application/x-ndjson"
                    self.send_response(reply.status)
                    self.send_header("content-type", kind)
                    self.send_header("content-length", str(sum(map(len, frames))))
                    self.end_headers()
                    for number, frame in enumerate(frames):
                        self.wfile.write(frame)
                        self.wfile.flush()
                        if number == 0 and reply.delay:
                            time.sleep(reply.delay)
                    return
                if reply.events is None:
                    payload = json.dumps(reply.json).encode()
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(payload)))
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                chunks = []
                for name, data in reply.events:
                    text = data if isinstance(data, str) else json.dumps(data)
                    frame = (f"event: {name}\n" if name else "") + f"data: {text}\n\n"
                    chunks.append(frame.encode())
                payload = b"".join(chunks)
                self.send_response(reply.status)
                self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                for number, chunk in enumerate(chunks):  # one write per event, as a real
                    self.wfile.write(chunk)  # stream flushes
                    self.wfile.flush()
                    if number == 0 and reply.delay:
                        time.sleep(reply.delay)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def add(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def start(self) -> ScriptedServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def bodies(self) -> list[Any]:
        return [request.body for request in self.requests]


def serve() -> Iterator[ScriptedServer]:
    server = ScriptedServer().start()
    try:
        yield server
    finally:
        server.stop()


# --- OpenAI Chat Completions ------------------------------------------------------------


def openai_chat_stream(
    *,
    text: str = "",
    calls: Sequence[tuple[str, str, str]] = (),
    finish: str | None = None,
    usage: tuple[int, int] = (12, 7),
    split: int = 7,
) -> Reply:
    """A streamed completion: text in pieces, each call's arguments split every `split`
    characters (ids and names in the first fragment), a finish chunk, usage, [DONE]."""
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
        return {**base, "choices": [choice]}

    events: list[tuple[str | None, Any]] = [(None, chunk({"role": "assistant", "content": ""}))]
    for start in range(0, len(text), split):
        events.append((None, chunk({"content": text[start : start + split]})))
    for index, (call_id, name, arguments) in enumerate(calls):
        pieces = [arguments[i : i + split] for i in range(0, len(arguments), split)] or [""]
        first = {
            "index": index,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": pieces[0]},
        }
        events.append((None, chunk({"tool_calls": [first]})))
        for piece in pieces[1:]:
            fragment = {"index": index, "function": {"arguments": piece}}
            events.append((None, chunk({"tool_calls": [fragment]})))
    reason = finish or ("tool_calls" if calls else "stop")
    events.append((None, chunk({}, reason)))
    prompt, completion = usage
    events.append(
        (
            None,
            {
                **base,
                "choices": [],
                "usage": {
                    "prompt_tokens": prompt,
                    "completion_tokens": completion,
                    "total_tokens": prompt + completion,
                },
            },
        )
    )
    events.append((None, "[DONE]"))
    return Reply(events=events)


def openai_error(status: int, message: str, code: str | None = None) -> Reply:
    error = {"message": message, "type": "error", "param": None, "code": code}
    return Reply(status, {"error": error})


# --- Anthropic Messages -------------------------------------------------------------------


def anthropic_stream(
    blocks: Sequence[dict[str, Any]],
    *,
    stop_reason: str | None = None,
    usage: tuple[int, int] = (20, 9),
    split: int = 6,
) -> Reply:
    """A streamed message from whole content blocks: text and thinking blocks stream as
    deltas (thinking ends with its signature_delta), tool_use input as input_json_delta
    pieces; then message_delta with the stop reason and usage, message_stop."""
    prompt, completion = usage
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": prompt, "output_tokens": 1},
    }
    events: list[tuple[str | None, Any]] = [
        ("message_start", {"type": "message_start", "message": message})
    ]
    for index, block in enumerate(blocks):
        kind = block["type"]
        if kind == "text":
            start: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [
                {"type": "text_delta", "text": block["text"][i : i + split]}
                for i in range(0, len(block["text"]), split)
            ]
        elif kind == "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [
                {"type": "thinking_delta", "thinking": block["thinking"][i : i + split]}
                for i in range(0, len(block["thinking"]), split)
            ]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif kind == "tool_use":
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            text = json.dumps(block["input"])
            deltas = [
                {"type": "input_json_delta", "partial_json": text[i : i + split]}
                for i in range(0, len(text), split)
            ]
        elif kind == "server_tool_use":  # the provider's own tool: input streamed too
            start = {**block, "input": {}}
            text = json.dumps(block["input"])
            deltas = [
                {"type": "input_json_delta", "partial_json": text[i : i + split]}
                for i in range(0, len(text), split)
            ]
        else:  # redacted_thinking and anything else: whole in the start event
            start, deltas = block, []
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            )
        )
        for delta in deltas:
            events.append(
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    reason = stop_reason or (
        "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    )
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": reason, "stop_sequence": None},
                "usage": {"output_tokens": completion},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return Reply(events=events)


def anthropic_error(status: int, kind: str, message: str) -> Reply:
    return Reply(status, {"type": "error", "error": {"type": kind, "message": message}})


# --- OpenAI Responses ---------------------------------------------------------------------


def responses_stream(
    items: Sequence[dict[str, Any]],
    *,
    incomplete: str | None = None,
    usage: tuple[int, int] = (25, 8),
    split: int = 6,
) -> Reply:
    """A streamed response from whole output items (``reasoning``, ``message`` with one
    output_text part, ``function_call``): added, deltas, done per item, then
    ``response.completed`` (or ``response.incomplete`` with `incomplete` as reason)."""
    sequence = itertools.count()
    events: list[tuple[str | None, Any]] = []

    def emit(kind: str, **fields: Any) -> None:
        events.append((kind, {"type": kind, "sequence_number": next(sequence), **fields}))

    response = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "model": "gpt-test",
        "status": "in_progress",
        "output": [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }
    emit("response.created", response=response)
    for index, item in enumerate(items):
        kind = item["type"]
        if kind == "message":
            text = item["content"][0]["text"]
            emit(
                "response.output_item.added",
                output_index=index,
                item={**item, "content": [], "status": "in_progress"},
            )
            for start in range(0, len(text), split):
                emit(
                    "response.output_text.delta",
                    item_id=item["id"],
                    output_index=index,
                    content_index=0,
                    delta=text[start : start + split],
                    logprobs=[],
                )
        elif kind == "function_call":
            emit(
                "response.output_item.added",
                output_index=index,
                item={**item, "arguments": "", "status": "in_progress"},
            )
            arguments = item["arguments"]
            for start in range(0, len(arguments), split):
                emit(
                    "response.function_call_arguments.delta",
                    item_id=item["id"],
                    output_index=index,
                    delta=arguments[start : start + split],
                )
            if incomplete is None:
                emit(
                    "response.function_call_arguments.done",
                    item_id=item["id"],
                    output_index=index,
                    arguments=arguments,
                )
        else:
            emit("response.output_item.added", output_index=index, item=item)
        if incomplete is None or kind != "function_call":
            emit("response.output_item.done", output_index=index, item=item)
    prompt, completion = usage
    final = {
        **response,
        "status": "incomplete" if incomplete else "completed",
        "output": list(items),
        "usage": {
            "input_tokens": prompt,
            "output_tokens": completion,
            "total_tokens": prompt + completion,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }
    if incomplete:
        final["incomplete_details"] = {"reason": incomplete}
        emit("response.incomplete", response=final)
    else:
        emit("response.completed", response=final)
    return Reply(events=events)


# --- Ollama /api/chat ---------------------------------------------------------------------


def ollama_stream(
    *,
    text: str = "",
    thinking: str = "",
    calls: Sequence[tuple[str, dict[str, Any]]] = (),
    done_reason: str = "stop",
    usage: tuple[int, int] = (15, 6),
    split: int = 5,
) -> Reply:
    """NDJSON chunks: thinking and text in pieces, the calls whole in one chunk (as
    Ollama sends them), then the ``done`` chunk with the reason and the counts."""
    base = {"model": "qwen3", "created_at": "2026-01-01T00:00:00Z"}

    def chunk(message: dict[str, Any], **fields: Any) -> dict[str, Any]:
        return {**base, "message": {"role": "assistant", "content": "", **message}, **fields}

    lines = [
        chunk({"thinking": thinking[i : i + split]}, done=False)
        for i in range(0, len(thinking), split)
    ]
    lines += [
        chunk({"content": text[i : i + split]}, done=False) for i in range(0, len(text), split)
    ]
    if calls:
        tool_calls = [{"function": {"name": n, "arguments": a}} for n, a in calls]
        lines.append(chunk({"tool_calls": tool_calls}, done=False))
    prompt, completion = usage
    lines.append(
        chunk(
            {},
            done=True,
            done_reason=done_reason,
            prompt_eval_count=prompt,
            eval_count=completion,
        )
    )
    return Reply(lines=lines)


# --- Gemini streamGenerateContent ---------------------------------------------------------


def gemini_stream(
    parts: Sequence[dict[str, Any]],
    *,
    finish: str = "STOP",
    usage: tuple[int, int] = (18, 7),
) -> Reply:
    """SSE chunks (``alt=sse``), one part per chunk, the last with the finish reason and
    the usage metadata, as ``streamGenerateContent`` sends them."""
    prompt, completion = usage
    events: list[tuple[str | None, Any]] = []
    for index, part in enumerate(parts):
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": [part]}, "index": 0}
        chunk: dict[str, Any] = {"candidates": [candidate], "modelVersion": "gemini-test"}
        if index == len(parts) - 1:
            candidate["finishReason"] = finish
            chunk["usageMetadata"] = {
                "promptTokenCount": prompt,
                "candidatesTokenCount": completion,
                "totalTokenCount": prompt + completion,
            }
        events.append((None, chunk))
    return Reply(events=events)


def gemini_error(status: int, code: str, message: str) -> Reply:
    return Reply(status, {"error": {"code": status, "message": message, "status": code}})


# --- Bedrock ConverseStream -----------------------------------------------------------------


def eventstream_frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One message of the AWS event stream encoding: prelude with its CRC32, string
    headers, payload, message CRC32."""
    encoded = b"".join(
        len(name).to_bytes(1, "big")
        + name.encode()
        + b"\x07"
        + len(value.encode()).to_bytes(2, "big")
        + value.encode()
        for name, value in headers.items()
    )
    total = 12 + len(encoded) + len(payload) + 4
    prelude = total.to_bytes(4, "big") + len(encoded).to_bytes(4, "big")
    message = prelude + zlib.crc32(prelude).to_bytes(4, "big") + encoded + payload
    return message + zlib.crc32(message).to_bytes(4, "big")


def bedrock_stream(
    blocks: Sequence[dict[str, Any]],
    *,
    stop_reason: str | None = None,
    usage: tuple[int, int] = (21, 8),
    split: int = 6,
) -> Reply:
    """ConverseStream events from whole content blocks (``text``, ``toolUse`` with
    ``input``, ``reasoningContent`` with text and signature), with usage metadata."""
    events: list[tuple[str, dict[str, Any]]] = [("messageStart", {"role": "assistant"})]
    for index, block in enumerate(blocks):
        if "toolUse" in block:
            use = block["toolUse"]
            start = {"toolUse": {"toolUseId": use["toolUseId"], "name": use["name"]}}
            events.append(("contentBlockStart", {"contentBlockIndex": index, "start": start}))
            text = json.dumps(use["input"])
            for i in range(0, len(text), split):
                delta = {"toolUse": {"input": text[i : i + split]}}
                events.append(("contentBlockDelta", {"contentBlockIndex": index, "delta": delta}))
        elif "reasoningContent" in block:
            reasoning = block["reasoningContent"]["reasoningText"]
            for i in range(0, len(reasoning["text"]), split):
                delta = {"reasoningContent": {"text": reasoning["text"][i : i + split]}}
                events.append(("contentBlockDelta", {"contentBlockIndex": index, "delta": delta}))
            delta = {"reasoningContent": {"signature": reasoning["signature"]}}
            events.append(("contentBlockDelta", {"contentBlockIndex": index, "delta": delta}))
        else:
            for i in range(0, len(block["text"]), split):
                delta = {"text": block["text"][i : i + split]}
                events.append(("contentBlockDelta", {"contentBlockIndex": index, "delta": delta}))
        events.append(("contentBlockStop", {"contentBlockIndex": index}))
    reason = stop_reason or ("tool_use" if any("toolUse" in b for b in blocks) else "end_turn")
    events.append(("messageStop", {"stopReason": reason}))
    prompt, completion = usage
    usage_data = {
        "inputTokens": prompt,
        "outputTokens": completion,
        "totalTokens": prompt + completion,
    }
    events.append(("metadata", {"usage": usage_data, "metrics": {"latencyMs": 5}}))
    frames = [
        eventstream_frame(
            {":event-type": name, ":content-type": "application/json", ":message-type": "event"},
            json.dumps(payload).encode(),
        )
        for name, payload in events
    ]
    return Reply(frames=frames)


def bedrock_error(status: int, code: str, message: str) -> Reply:
    return Reply(status, {"message": message}, headers={"x-amzn-ErrorType": code})
