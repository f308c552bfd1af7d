"""The ``openai`` SDK as both OpenAI adapters (Chat Completions, Responses) load it."""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

from toolbridge.agent.adapters._common import missing_sdk
from toolbridge.agent.errors import ModelAuthenticationError

__all__ = ["openai_client", "openai_sdk"]


def openai_sdk() -> ModuleType:
    """The ``openai`` module, or an ImportError naming the extra to install."""
    try:
        import openai
    except ImportError:
        raise missing_sdk("openai", "openai") from None
    return openai


def openai_client(openai: ModuleType, *, api_key: str | None, base_url: str | None) -> Any:
    """An ``openai.AsyncOpenAI`` from the environment (``OPENAI_API_KEY``) and `base_url`.

    A `base_url` without any key is a local OpenAI-compatible server, which takes any key.
    """
    if api_key is None and base_url is not None and not os.environ.get("OPENAI_API_KEY"):
        api_key = "not-needed"
    try:
        return openai.AsyncOpenAI(api_key=api_key, base_url=base_url)
    except openai.OpenAIError as exc:
        raise ModelAuthenticationError(
            f"cannot make an OpenAI client: {exc} (set OPENAI_API_KEY, or pass "
            "client= or base_url=)"
        ) from None
