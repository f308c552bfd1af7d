"""AWS Bedrock Converse over the official ``boto3`` SDK (``converse_stream``).

boto3 is synchronous, so the request and each stream event are awaited in a worker
thread; the event loop never blocks. Definitions, the assistant turn (reasoning blocks
replayed), tool results and the stream go through `toolbridge.formats.bedrock`; this
module calls the SDK, reads the display deltas and usage, merges consecutive same-role
messages (Converse requires the roles to alternate), and maps the errors.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from toolbridge.agent.adapters._common import (
    Deltas,
    claude_has_json_outputs,
    error_for_status,
    history,
    missing_sdk,
    sampling,
    stream_turn,
    tokens,
)
from toolbridge.agent.errors import (
    ModelAuthenticationError,
    ModelConnectionError,
    ModelError,
    RateLimitError,
)
from toolbridge.agent.events import ModelEvent
from toolbridge.agent.messages import Usage
from toolbridge.agent.model import ModelRequest, NativeOutput
from toolbridge.formats import bedrock as bedrock_format

__all__ = ["BedrockModel"]

_END = object()
_STATUS_BY_CODE = {"ThrottlingException": 429, "ServiceUnavailableException": 503}


def _deltas(data: dict[str, Any]) -> Deltas:
    delta_event = data.get("contentBlockDelta")
    if isinstance(delta_event, dict):
        delta = delta_event.get("delta") or {}
        text = delta.get("text")
        reasoning = (delta.get("reasoningContent") or {}).get("text")
        return (
            text if isinstance(text, str) else "",
            reasoning if isinstance(reasoning, str) else "",
            None,
        )
    metadata = data.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("usage"), dict):
        usage = metadata["usage"]
        return (
            "",
            "",
            Usage(
                tokens(usage, "inputTokens"),
                tokens(usage, "outputTokens"),
                tokens(usage, "cacheReadInputTokens"),
                1,
            ),
        )
    return "", "", None


def merge_roles(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Consecutive messages of one role as one message (their content lists joined)."""
    merged: list[dict[str, Any]] = []
    for message in messages:
        if merged and merged[-1]["role"] == message["role"]:
            merged[-1] = {**merged[-1], "content": [*merged[-1]["content"], *message["content"]]}
        else:
            merged.append(message)
    return merged


async def _events(stream: Any) -> AsyncIterator[Any]:
    """The EventStream's events, each read in a worker thread."""
    iterator: Iterator[Any] = iter(stream)
    try:
        while True:
            event = await asyncio.to_thread(next, iterator, _END)
            if event is _END:
                return
            yield event
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()


class BedrockModel:
    """A model on Bedrock. Pass `client` (a boto3 ``bedrock-runtime`` client you built:
    credentials, region, endpoint and retries are its own) or let it build one from the
    environment (`region` overrides the default region). Structured output is native
    (``outputConfig.textFormat`` with a JSON schema) when every object in the schema is
    closed, as for Anthropic's JSON outputs.
    """

    format = "bedrock"

    def __init__(self, model: str, *, client: Any = None, region: str | None = None) -> None:
        try:
            import boto3
            import botocore.exceptions
        except ImportError:
            raise missing_sdk("boto3", "bedrock") from None
        self._botocore = botocore.exceptions
        if client is None:
            try:
                client = boto3.client("bedrock-runtime", region_name=region)
            except botocore.exceptions.BotoCoreError as exc:  # no region, a bad profile
                raise ModelError(
                    f"cannot make a Bedrock client: {exc} (set AWS_REGION or a profile's "
                    "region, or pass region= or client=)"
                ) from None
        self.client = client
        self.model = model

    def request_kwargs(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments for ``converse_stream`` (rendered incrementally)."""
        messages = merge_roles(history(request, self.format))
        kwargs: dict[str, Any] = {"modelId": self.model, "messages": messages}
        if request.instructions:
            kwargs["system"] = [{"text": request.instructions}]
        tools = request.cache.definitions(self.format, request.tools, bedrock_format.definitions)
        if tools:
            kwargs["toolConfig"] = {"tools": tools}
        inference = sampling(request.settings, max_tokens="maxTokens")
        if inference:
            kwargs["inferenceConfig"] = inference
        kwargs.update(request.settings.extra)
        output = request.output
        if output is not None and output.closed_schema is not None:
            definition = {"name": output.name, "schema": json.dumps(output.closed_schema)}
            if output.description:
                definition["description"] = output.description
            kwargs["outputConfig"] = {
                **kwargs.get("outputConfig", {}),  # effort from `extra` stays
                "textFormat": {"type": "json_schema", "structure": {"jsonSchema": definition}},
            }
        return kwargs

    def supports_native_output(self, output: NativeOutput) -> bool:
        """Schemas whose objects can all be closed (as for Anthropic's JSON outputs), on
        Claude models that have JSON outputs; other Bedrock models vary, so they answer
        through the ``final_result`` tool (``output_mode="native"`` is not offered)."""
        return output.closed_schema is not None and claude_has_json_outputs(self.model)

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        return stream_turn(
            self,
            request,
            deltas=_deltas,
            call=lambda: self._converse_stream(request),
            error=self._error,
        )

    async def _converse_stream(self, request: ModelRequest) -> AsyncIterator[Any]:
        """Start ``converse_stream`` in a worker thread (boto3 blocks); its events follow."""
        response = await asyncio.to_thread(
            self.client.converse_stream, **self.request_kwargs(request)
        )
        return _events(response["stream"])

    def _error(self, exc: Exception) -> ModelError | None:
        errors = self._botocore
        if isinstance(exc, errors.ClientError):  # EventStreamError too: an error event
            return self._client_error(exc)
        if isinstance(exc, errors.NoCredentialsError):
            return ModelAuthenticationError(f"no AWS credentials for Bedrock: {exc}", cause=exc)
        if isinstance(exc, errors.EndpointConnectionError | errors.ConnectionClosedError):
            return ModelConnectionError(f"cannot reach Bedrock: {exc}", cause=exc)
        return None

    def _client_error(self, exc: Any) -> ModelError:
        error = exc.response.get("Error", {})
        code = str(error.get("Code") or "")
        message = f"{code}: {error.get('Message') or exc}"
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        status = _STATUS_BY_CODE.get(code, status)
        if code == "ThrottlingException":
            return RateLimitError(f"the model call failed (HTTP 429): {message}", status=429)
        return error_for_status(status, message, exc)
