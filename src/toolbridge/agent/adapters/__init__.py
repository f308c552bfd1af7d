"""Model adapters over the providers' official async SDKs, one module per SDK.

Each adapter takes a client you built (transport, auth, proxies and retries stay the
SDK's) or builds one from the environment, renders the neutral conversation through
`toolbridge.formats`, feeds the SDK's stream events to the format's stream adapter,
and maps the SDK's errors to `toolbridge.agent.errors`. The SDKs are optional extras:
a module imports its SDK only when an adapter is made.
"""

from __future__ import annotations

from toolbridge.agent.adapters.anthropic import AnthropicModel
from toolbridge.agent.adapters.bedrock import BedrockModel
from toolbridge.agent.adapters.gemini import GeminiModel
from toolbridge.agent.adapters.ollama import OllamaModel
from toolbridge.agent.adapters.openai_chat import OpenAIChatModel
from toolbridge.agent.adapters.openai_responses import OpenAIResponsesModel

__all__ = [
    "AnthropicModel",
    "BedrockModel",
    "GeminiModel",
    "OllamaModel",
    "OpenAIChatModel",
    "OpenAIResponsesModel",
]
