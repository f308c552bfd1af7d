"""The raw-text dialects, and the names users know them by.

A `Dialect` is one way of writing calls in text (its reader), the reasoning tags its
models write before the answer, and the special tokens that end a turn. Model family
names and vLLM's ``--tool-call-parser`` names resolve to a dialect through `ALIASES`;
names of structured provider APIs (``bedrock_converse`` …) are not text dialects and
get an error pointing to the provider format that reads them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from toolbridge.formats.text import deepseek, functiongemma, kimi, llama, mistral, pythonic
from toolbridge.formats.text._common import Reader
from toolbridge.formats.text.harmony import read_harmony
from toolbridge.formats.text.reasoning import MAGISTRAL, THINK, ReasoningTags
from toolbridge.formats.text.tagged import END_TOKENS as QWEN_END_TOKENS
from toolbridge.formats.text.tagged import read_hermes, read_qwen3_coder

__all__ = ["ALIASES", "DIALECTS", "Dialect", "UnknownDialect", "known_names", "resolve_dialect"]


@dataclass(frozen=True, slots=True)
class Dialect:
    """How one family of models writes tool calls in text."""

    name: str
    read: Callable[[Reader], None]
    reasoning: ReasoningTags = ()
    end_tokens: tuple[str, ...] = ()
    alphanumeric9_ids: bool = False


DIALECTS: Mapping[str, Dialect] = MappingProxyType(
    {
        dialect.name: dialect
        for dialect in (
            Dialect("hermes", read_hermes, THINK, QWEN_END_TOKENS),
            Dialect("qwen3_coder", read_qwen3_coder, THINK, QWEN_END_TOKENS),
            Dialect("llama3_json", llama.read_llama, (), llama.END_TOKENS),
            Dialect("pythonic", pythonic.read_pythonic, (), pythonic.END_TOKENS),
            Dialect("mistral", mistral.read_mistral, MAGISTRAL + THINK, mistral.END_TOKENS, True),
            Dialect("deepseek_v3", deepseek.read_deepseek, THINK, deepseek.END_TOKENS),
            Dialect("kimi_k2", kimi.read_kimi_k2, THINK, kimi.END_TOKENS),
            Dialect("harmony", read_harmony),
            Dialect(
                "functiongemma",
                functiongemma.read_functiongemma,
                (),
                functiongemma.END_TOKENS,
            ),
        )
    }
)
"""The dialects by their canonical name."""

ALIASES: Mapping[str, str] = MappingProxyType(
    {
        # Hermes-style <tool_call>{json}</tool_call>
        "qwen": "hermes",
        "qwen2_5": "hermes",
        "qwen3": "hermes",
        "qwq": "hermes",
        "hermes2_pro": "hermes",
        "hermes3": "hermes",
        "hermes4": "hermes",
        # Qwen3-Coder's XML-style body
        "qwen3_xml": "qwen3_coder",
        # Llama 3.x: JSON, <function=…>, <|python_tag|>
        "llama3": "llama3_json",
        "llama3_1": "llama3_json",
        "llama3_2": "llama3_json",
        "llama3_3": "llama3_json",
        "llama4_json": "llama3_json",
        "llama": "llama3_json",
        # pythonic [f(a=1)]
        "llama4": "pythonic",
        "llama4_pythonic": "pythonic",
        # Mistral
        "magistral": "mistral",
        "mistral_small": "mistral",
        "devstral": "mistral",
        # DeepSeek
        "deepseek": "deepseek_v3",
        "deepseek_r1": "deepseek_v3",
        "deepseek_v31": "deepseek_v3",
        "deepseek_v3_1": "deepseek_v3",
        # Kimi
        "kimi": "kimi_k2",
        "kimi_k2_thinking": "kimi_k2",
        # gpt-oss
        "openai": "harmony",
        "gpt_oss": "harmony",
        # FunctionGemma
        "function_gemma": "functiongemma",
    }
)
"""Family names and vLLM ``--tool-call-parser`` names, normalised (see `resolve_dialect`)."""

PROVIDER_FORMATS: Mapping[str, str] = MappingProxyType(
    {
        "bedrock": "bedrock",
        "bedrock_converse": "bedrock",
        "converse": "bedrock",
        "openai_chat": "openai_chat",
        "openai_responses": "openai_responses",
        "anthropic": "anthropic",
        "gemini": "gemini",
        "ollama": "ollama",
    }
)
"""Structured provider APIs users may name by mistake, and their format module."""


class UnknownDialect(ValueError):
    """A dialect name that names no raw-text dialect; the message lists the known names."""


def known_names() -> list[str]:
    """Every name `resolve_dialect` accepts (besides ``"auto"``), sorted."""
    return sorted({*DIALECTS, *ALIASES})


def resolve_dialect(name: str) -> Dialect:
    """The dialect a user-facing `name` means: a canonical name, a model family
    (``qwen3``, ``llama4``, ``gpt-oss``, ``deepseek-v3.1`` …) or a vLLM
    ``--tool-call-parser`` name. Case, ``-``, ``.`` and spaces do not matter.

    Raises `UnknownDialect` for anything else; for a structured provider API such as
    ``bedrock_converse`` the error says which ``toolbridge.formats`` module reads it.
    """
    if not isinstance(name, str):
        raise UnknownDialect(f"a dialect name must be a string, got {type(name).__name__}")
    key = name.strip().lower().replace("-", "_").replace(".", "_").replace(" ", "_")
    key = ALIASES.get(key, key)
    if key in DIALECTS:
        return DIALECTS[key]
    if key in PROVIDER_FORMATS:
        module = PROVIDER_FORMATS[key]
        raise UnknownDialect(
            f"{name!r} is a structured provider API, not a raw-text dialect: its tool calls "
            f"arrive as JSON, so read the response with "
            f"toolbridge.formats.{module}.parse_response(payload)"
        )
    raise UnknownDialect(
        f"unknown dialect {name!r}; use 'auto' or one of: {', '.join(known_names())}"
    )
