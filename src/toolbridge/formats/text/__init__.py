"""Tool calls written in generated text, for open-weight models served without a
tool-call parser: Hermes/Qwen, Qwen3-Coder, Llama 3.x (JSON, ``<function=…>``,
``<|python_tag|>``), pythonic (Llama 4), Mistral, DeepSeek V3/V3.1/R1, Kimi K2, gpt-oss
harmony and FunctionGemma.

`parse_text_calls` returns the calls (`ToolCallRequest`, with a stable generated id
where the text has none), the reply text exactly as written, the reasoning (split off
first and never read for calls), and the problems: every call-shaped piece that could
not be read. Arguments are never repaired: broken or cut-off argument text goes to the
registry as it is, which tells the model what is wrong.
"""

from __future__ import annotations

from toolbridge.formats.text._common import Reader, TextCalls, TextSpan
from toolbridge.formats.text.deepseek import CALL_BEGIN as DEEPSEEK_CALL_BEGIN
from toolbridge.formats.text.dialects import (
    ALIASES,
    DIALECTS,
    Dialect,
    UnknownDialect,
    known_names,
    resolve_dialect,
)
from toolbridge.formats.text.functiongemma import START as FUNCTIONGEMMA_START
from toolbridge.formats.text.harmony import MESSAGE as HARMONY_MESSAGE
from toolbridge.formats.text.kimi import CALL_BEGIN as KIMI_CALL_BEGIN
from toolbridge.formats.text.llama import FUNCTION_CLOSE, FUNCTION_OPEN, PYTHON_TAG
from toolbridge.formats.text.mistral import TOOL_CALLS
from toolbridge.formats.text.reasoning import MAGISTRAL, THINK, read_reasoning
from toolbridge.formats.text.tagged import END as TOOL_CALL_END
from toolbridge.formats.text.tagged import START as TOOL_CALL_START

__all__ = [
    "ALIASES",
    "DIALECTS",
    "Dialect",
    "TextCalls",
    "TextSpan",
    "UnknownDialect",
    "detect_dialect",
    "known_names",
    "parse_text_calls",
    "resolve_dialect",
]


def detect_dialect(text: str) -> str | None:
    """The dialect whose markers the text carries, or None when it shows none.

    Marker-less dialects are recognised by shape: a reply that is a ``[f(…)]`` list is
    pythonic, one that starts with ``{"name"`` is Llama JSON.
    """
    if HARMONY_MESSAGE in text and ("<|channel|>" in text or "to=" in text):
        return "harmony"
    if KIMI_CALL_BEGIN in text:
        return "kimi_k2"
    if DEEPSEEK_CALL_BEGIN in text:
        return "deepseek_v3"
    if TOOL_CALLS in text:
        return "mistral"
    if FUNCTIONGEMMA_START in text:
        return "functiongemma"
    start = text.find(TOOL_CALL_START)
    if start != -1:
        after = text[start + len(TOOL_CALL_START) :].lstrip()
        return "qwen3_coder" if after.startswith("<function=") else "hermes"
    if TOOL_CALL_END in text:
        return "hermes"
    if PYTHON_TAG in text or FUNCTION_OPEN in text or FUNCTION_CLOSE in text:
        return "llama3_json"
    body = text.strip()
    if body.startswith("{") and '"name"' in body:
        return "llama3_json"
    if body.startswith(("[", "<|python_start|>")) and "(" in body:
        return "pythonic"
    return None


def parse_text_calls(text: str, dialect: str = "auto", *, id_salt: str = "") -> TextCalls:
    """Calls, reply text, reasoning and problems of one reply written in `dialect`.

    `dialect` is a name `resolve_dialect` knows (``hermes``, ``qwen3``, ``llama4``,
    ``gpt-oss``, ``deepseek_v31``, vLLM's parser names …) or ``"auto"``: the reasoning
    (any known tags) is split off, then the dialect is detected from the rest; text
    without any dialect's markers comes back whole, with no calls. `id_salt` keeps the
    generated ids of identical calls in different turns apart.

    Never raises for any `text`; an unknown `dialect` raises `UnknownDialect` (a
    `ValueError`) listing the known names, a `text` that is not a string `TypeError`.
    """
    if not isinstance(text, str):
        raise TypeError(f"expected the model's text as a str, got {type(text).__name__}")
    reader = Reader(text, id_salt)
    if dialect == "auto":
        read_reasoning(reader, MAGISTRAL + THINK)
        detected = detect_dialect(text[reader.pos :])
        if detected is None:
            return reader.result()
        chosen = DIALECTS[detected]
    else:
        chosen = resolve_dialect(dialect)
        read_reasoning(reader, chosen.reasoning)
    reader.alphanumeric9_ids = chosen.alphanumeric9_ids
    reader.end_tokens = chosen.end_tokens
    chosen.read(reader)
    return reader.result(chosen.name)
