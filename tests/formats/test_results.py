"""Results back: each provider's message shape, accepted by its SDK types."""

from __future__ import annotations

import base64
import json
from typing import Any

import anthropic.types
import google.genai.types as genai
import ollama
from openai.types.chat import ChatCompletionToolMessageParam, ChatCompletionUserMessageParam
from openai.types.responses.response_input_param import FunctionCallOutput
from pydantic import TypeAdapter

from toolbridge import ToolCallRequest, ToolResult
from toolbridge.formats import anthropic as anthropic_format
from toolbridge.formats import bedrock, gemini, openai_chat, openai_responses
from toolbridge.formats import ollama as ollama_format

CALL_IDS = ["call_1", "call_2", "call_3", "call_4"]


def _typed_dict(kind: Any, value: dict[str, Any]) -> None:
    TypeAdapter(kind).validate_python(value)
    assert set(value) <= kind.__required_keys__ | kind.__optional_keys__


def test_openai_chat_tool_messages_then_images(outcomes: list[Any]) -> None:
    messages = openai_chat.result_messages(outcomes)
    tool_messages, image_message = messages[:4], messages[4]
    for message in tool_messages:
        _typed_dict(ChatCompletionToolMessageParam, message)
    _typed_dict(ChatCompletionUserMessageParam, image_message)
    assert [m["tool_call_id"] for m in tool_messages] == CALL_IDS
    assert tool_messages[0]["content"] == "hello"
    assert tool_messages[1]["content"].startswith("Error: sleep failed")
    assert json.loads(tool_messages[2]["content"]) == {"size": 3, "name": "a"}
    assert tool_messages[3]["content"] == "the screen\n[image 1: shown in the next message]"
    parts = image_message["content"]
    assert parts[0]["text"] == "Image from tool call call_4:"
    assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,iVBORw0KGgo")
    assert len(messages) == 5


def test_responses_outputs_by_call_id(outcomes: list[Any]) -> None:
    items = openai_responses.result_messages(outcomes)
    for item in items:
        _typed_dict(FunctionCallOutput, item)
    assert [i["call_id"] for i in items] == CALL_IDS
    assert items[0]["output"] == "hello"
    image_output = items[3]["output"]
    assert image_output[0] == {"type": "input_text", "text": "the screen"}
    assert image_output[1]["type"] == "input_image"


def test_anthropic_one_user_message_with_every_result(outcomes: list[Any]) -> None:
    messages = anthropic_format.result_messages(outcomes)
    assert len(messages) == 1
    TypeAdapter(anthropic.types.MessageParam).validate_python(messages[0])
    blocks = messages[0]["content"]
    assert [b["tool_use_id"] for b in blocks] == CALL_IDS
    assert [b["is_error"] for b in blocks] == [False, True, False, False]
    image = blocks[3]["content"][1]
    assert image["source"]["media_type"] == "image/png"
    assert base64.b64decode(image["source"]["data"]).startswith(b"\x89PNG")
    assert anthropic_format.result_messages([]) == []


def test_gemini_function_responses(outcomes: list[Any], make_outcome: Any) -> None:
    generated = make_outcome(
        ToolCallRequest("call_9", "get_time", None, {"generated_id": True}), ToolResult("noon")
    )
    messages = gemini.result_messages([*outcomes, generated])
    content = genai.Content.model_validate_json(json.dumps(messages[0]))
    responses = [part.function_response for part in content.parts or []]
    assert [r.id for r in responses if r] == [*CALL_IDS, None]  # no made-up id sent back
    wire = [p["functionResponse"] for p in messages[0]["parts"]]
    assert wire[0]["response"] == {"output": "hello"}
    assert wire[1]["response"]["error"].startswith("Error: sleep failed")
    assert wire[2]["response"] == {"output": {"size": 3, "name": "a"}}
    assert wire[3]["parts"][0]["inlineData"]["mimeType"] == "image/png"
    assert messages[0]["role"] == "user"


def test_ollama_tool_messages(outcomes: list[Any]) -> None:
    messages = ollama_format.result_messages(outcomes)
    for message in messages:  # the SDK's own serialisation gives the same wire shape
        images = [ollama.Image(value=base64.b64decode(i)) for i in message.get("images", [])]
        # the installed SDK's model predates tool_call_id; Ollama's API reads it
        sdk_fields = {k: v for k, v in message.items() if k != "tool_call_id"}
        sdk_message = ollama.Message(**{**sdk_fields, "images": images or None})
        assert sdk_message.model_dump(exclude_none=True) == sdk_fields
    assert [m["tool_call_id"] for m in messages] == [o.call.id for o in outcomes]
    assert [m["tool_name"] for m in messages] == ["read_file", "sleep", "stat", "screenshot"]
    assert base64.b64decode(messages[3]["images"][0]).startswith(b"\x89PNG")


def test_ollama_result_names_its_call_by_id_only_when_the_call_had_one(make_outcome: Any) -> None:
    real = make_outcome(ToolCallRequest("call_7", "get_time", {}), ToolResult("noon"))
    made_up = make_outcome(
        ToolCallRequest("call_9", "get_time", {}, {"generated_id": True}), ToolResult("noon")
    )
    first, second = ollama_format.result_messages([real, made_up])
    assert (first["tool_call_id"], first["tool_name"]) == ("call_7", "get_time")
    assert "tool_call_id" not in second and second["tool_name"] == "get_time"


def test_bedrock_tool_results_with_status(outcomes: list[Any]) -> None:
    (message,) = bedrock.result_messages(outcomes)
    results = [block["toolResult"] for block in message["content"]]
    assert [r["toolUseId"] for r in results] == CALL_IDS
    assert [r["status"] for r in results] == ["success", "error", "success", "success"]
    assert results[2]["content"] == [{"json": {"size": 3, "name": "a"}}]
    image = results[3]["content"][1]["image"]
    assert image["format"] == "png" and image["source"]["bytes"].startswith(b"\x89PNG")
    (encoded,) = bedrock.result_messages(outcomes, base64_images=True)
    wire_image = encoded["content"][3]["toolResult"]["content"][1]["image"]["source"]["bytes"]
    assert base64.b64decode(wire_image).startswith(b"\x89PNG")
    json.dumps(encoded)  # the HTTP form is plain JSON
