"""The ``openai`` SDK as both OpenAI adapters (Chat Completions, Responses) use it:
making the client, reading its errors, and the ``json_schema`` structured-output format."""

from __future__ import annotations

import os
from typing import Any

from toolbridge.agent.adapters._common import missing_sdk, stainless_error
from toolbridge.agent.errors import ModelAuthenticationError, ModelError
from toolbridge.agent.native_output import NativeOutput

__all__ = ["json_schema_format", "openai_client", "openai_error"]


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


def json_schema_format(output: NativeOutput) -> dict[str, Any]:
    """The ``json_schema`` format's fields (name, schema, strict, description): strict
    with the strict form of the schema when strict mode can express it, else the full
    schema with ``strict: false`` (the answer is validated client-side either way)."""
    strict = output.strict_schema is not None
    fields: dict[str, Any] = {
        "name": output.name,
        "schema": output.strict_schema if output.strict_schema is not None else output.schema,
        "strict": strict,
    }
    if output.description:
        fields["description"] = output.description
    return fields


def openai_error(exc: Exception) -> ModelError | None:
    """The typed error for an exception of the ``openai`` SDK, or None."""
    import openai  # already loaded: no adapter exists without it

    return stainless_error(exc, openai, "the model server")
