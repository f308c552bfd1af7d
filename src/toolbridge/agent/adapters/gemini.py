"""Gemini over the official ``google-genai`` SDK (``generate_content_stream``).

Definitions, contents (thought signatures replayed with their parts), function
responses and the stream go through `toolbridge.formats.gemini`; this module calls the
SDK, reads the display deltas and usage, and maps the errors. The SDK takes the
wire's camelCase dicts as they are, signatures included.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

from toolbridge.agent.adapters._common import (
    Deltas,
    error_for_status,
    history,
    missing_sdk,
    sampling,
    stream_turn,
    tokens,
)
from toolbridge.agent.errors import ModelAuthenticationError, ModelConnectionError, ModelError
from toolbridge.agent.events import ModelEvent
from toolbridge.agent.messages import Usage
from toolbridge.agent.model import ModelRequest, NativeOutput
from toolbridge.formats import gemini as gemini_format

__all__ = ["GeminiModel"]


def _deltas(data: dict[str, Any]) -> Deltas:
    text: list[str] = []
    thought: list[str] = []
    for candidate in (data.get("candidates") or ())[:1]:
        content = candidate.get("content") if isinstance(candidate, dict) else None
        for part in (content or {}).get("parts") or ():
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                (thought if part.get("thought") else text).append(part["text"])
    usage = None
    meta = data.get("usageMetadata")
    if isinstance(meta, dict):
        usage = Usage(
            tokens(meta, "promptTokenCount"),
            tokens(meta, "candidatesTokenCount") + tokens(meta, "thoughtsTokenCount"),
            tokens(meta, "cachedContentTokenCount"),
            1,
        )
    return "".join(text), "".join(thought), usage


class GeminiModel:
    """A Gemini model. Pass `client` (a ``google.genai.Client`` you built, Vertex AI
    included) or let it build one from the environment (``GEMINI_API_KEY`` /
    ``GOOGLE_API_KEY``); `base_url` points it elsewhere. Instructions go to
    ``system_instruction``. Structured output is native: ``response_mime_type``
    ``application/json`` with the schema as ``response_json_schema`` (models before
    Gemini 3 refuse it together with function calling: pass ``output_mode="tool"``).
    """

    format = "gemini"

    def __init__(
        self,
        model: str,
        *,
        client: Any = None,
        base_url: str | None = None,
        api_key: str | None = None,
        json_schema: bool | None = None,
    ) -> None:
        try:
            import httpx
            from google import genai
            from google.genai import errors, types
        except ImportError:
            raise missing_sdk("google-genai", "gemini") from None
        self._errors = errors
        self._transport_errors = _transport_errors(httpx.TransportError)
        if client is None:
            options = types.HttpOptions(base_url=base_url) if base_url else None
            try:
                client = genai.Client(api_key=api_key, http_options=options)
            except ValueError as exc:
                raise ModelAuthenticationError(
                    f"cannot make a Gemini client: {exc} (set GEMINI_API_KEY or pass client=)"
                ) from None
        self.client = client
        self.model = model
        self.json_schema = json_schema

    def request_kwargs(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments for ``aio.models.generate_content_stream``."""
        contents = history(request, self.format)
        config: dict[str, Any] = {"automatic_function_calling": {"disable": True}}
        if request.instructions:
            config["system_instruction"] = request.instructions
        tools = request.cache.definitions(
            (self.format, self.json_schema),
            request.tools,
            lambda registry: gemini_format.definitions(registry, json_schema=self.json_schema),
        )
        if tools:
            config["tools"] = tools
        if request.output is not None:
            config["response_mime_type"] = "application/json"
            config["response_json_schema"] = request.output.schema
        config.update(sampling(request.settings, max_tokens="max_output_tokens"))
        config.update(request.settings.extra)
        return {"model": self.model, "contents": contents, "config": config}

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        return stream_turn(
            self,
            request,
            deltas=_deltas,
            call=lambda: self.client.aio.models.generate_content_stream(
                **self.request_kwargs(request)
            ),
            error=self._error,
        )

    def supports_native_output(self, output: NativeOutput) -> bool:
        """Every schema (``response_json_schema`` takes JSON Schema as it is), on Gemini 3
        and later: earlier models refuse a JSON answer format together with function
        calling, so they answer through the ``final_result`` tool."""
        found = re.search(r"gemini-(\d+)", self.model)
        return found is not None and int(found.group(1)) >= 3

    def _error(self, exc: Exception) -> ModelError | None:
        if isinstance(exc, self._errors.APIError):
            return error_for_status(exc.code, str(exc.message or exc), exc)
        if isinstance(exc, self._transport_errors):
            return ModelConnectionError(f"cannot reach Gemini: {exc}", cause=exc)
        return None


def _transport_errors(*known: type[Exception]) -> tuple[type[Exception], ...]:
    """The connection errors google-genai may raise: httpx's, and those of the httpx2 fork
    newer google-genai releases use (which are not httpx's classes)."""
    found = list(known)
    try:
        import httpx2  # type: ignore[import-not-found,unused-ignore]

        found.append(httpx2.TransportError)
    except ImportError:
        pass
    return tuple(found)
