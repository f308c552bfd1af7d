"""The ``openai`` SDK as both OpenAI adapters (Chat Completions, Responses) use it:
making the client and reading its errors."""

from __future__ import annotations

import os
from typing import Any

from toolbridge.agent.adapters._common import missing_sdk, stainless_error
from toolbridge.agent.errors import ModelAuthenticationError, ModelError

__all__ = ["openai_client", "openai_error"]


def openai_client(client: Any, *, api_key: str | None, base_url: str | None) -> Any:
    """`client`, or an ``openai.AsyncOpenAI`` from the environment (``OPENAI_API_KEY``)
    and `base_url`; an ImportError naming the extra when ``openai`` is not installed.

    A `base_url` without any key is a local OpenAI-compatible server, which takes any key.
    """
    try:
        import openai
    except ImportError:
        raise missing_sdk("openai", "openai") from None
    if client is not None:
        return client
    if api_key is None and base_url is not None and not os.environ.get("OPENAI_API_KEY"):
        api_key = "not-needed"
    try:
        return openai.AsyncOpenAI(api_key=api_key, base_url=base_url)
    except openai.OpenAIError as exc:
        raise ModelAuthenticationError(
            f"cannot make an OpenAI client: {exc} (set OPENAI_API_KEY, or pass "
            "client= or base_url=)"
        ) from None


def openai_error(exc: Exception) -> ModelError | None:
    """The typed error for an exception of the ``openai`` SDK, or None."""
    import openai  # already loaded: no adapter exists without it

    return stainless_error(exc, openai, "the model server")
