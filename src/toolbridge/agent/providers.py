"""``"provider:model"`` strings -> model adapters built from the environment."""

from __future__ import annotations

from typing import Any

from toolbridge.agent.errors import ModelError
from toolbridge.agent.model import ModelAdapter

__all__ = ["PROVIDERS", "model_from_string"]

PROVIDERS = ("openai", "openai-responses", "anthropic", "gemini", "ollama", "bedrock")
"""The provider prefixes `model_from_string` knows."""


def model_from_string(spec: str, *, base_url: str | None = None, **options: Any) -> ModelAdapter:
    """``openai:gpt-4.1-mini``, ``anthropic:claude-sonnet-4-5``, ``ollama:qwen3`` -> an
    adapter whose SDK client reads its key and endpoint from the environment.

    ``ollama:`` speaks Ollama's native ``/api/chat`` (``OLLAMA_HOST``, default
    ``http://localhost:11434``); for its OpenAI-compatible endpoint use
    ``openai:MODEL`` with ``base_url=".../v1"``. `base_url` and `options` go to the
    adapter.
    """
    provider, sep, model = spec.partition(":")
    if not sep or not model or not provider:
        raise ValueError(
            f"model {spec!r} is not 'provider:model'; for example 'openai:gpt-4.1-mini', "
            f"'anthropic:claude-sonnet-4-5' or 'ollama:qwen3' (providers: {', '.join(PROVIDERS)})"
        )
    if provider == "openai":
        from toolbridge.agent.adapters.openai_chat import OpenAIChatModel

        return OpenAIChatModel(model, base_url=base_url, **options)
    if provider == "openai-responses":
        from toolbridge.agent.adapters.openai_responses import OpenAIResponsesModel

        return OpenAIResponsesModel(model, base_url=base_url, **options)
    if provider == "gemini":
        from toolbridge.agent.adapters.gemini import GeminiModel

        return GeminiModel(model, base_url=base_url, **options)
    if provider == "anthropic":
        from toolbridge.agent.adapters.anthropic import AnthropicModel

        return AnthropicModel(model, base_url=base_url, **options)
    if provider == "bedrock":
        from toolbridge.agent.adapters.bedrock import BedrockModel

        if base_url is not None and "client" not in options:
            import boto3
            import botocore.exceptions

            try:
                options["client"] = boto3.client("bedrock-runtime", endpoint_url=base_url)
            except botocore.exceptions.BotoCoreError as exc:  # no region, as BedrockModel says
                raise ModelError(
                    f"cannot make a Bedrock client for {base_url}: {exc} (set AWS_REGION or "
                    "a profile's region)"
                ) from None
        return BedrockModel(model, **options)
    if provider == "ollama":
        from toolbridge.agent.adapters.ollama import OllamaModel

        return OllamaModel(model, host=base_url, **options)
    raise ValueError(
        f"unknown model provider {provider!r} in {spec!r}; known: {', '.join(PROVIDERS)}"
    )
