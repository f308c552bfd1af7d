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
    parsed, closing = _parse(text, dialect, id_salt, implicit=True)
    if closing is not None and (parsed.problems or not parsed.calls):
        # A bare closing tag was taken for the end of reasoning whose opening tag was in
        # the prompt. If the reply read whole has clean calls and that tag is not in its
        # text, the tag sat inside a call (an argument holding "</think>"): that reading
        # wins. A call written in reasoning still never counts: there the tag is text.
        whole, _ = _parse(text, dialect, id_salt, implicit=False)
        if whole.calls and not whole.problems and closing not in whole.text:
            return whole
    return parsed


def _parse(
    text: str, dialect: str, id_salt: str, *, implicit: bool
) -> tuple[TextCalls, str | None]:
    """One reading of the reply, and the closing tag if it took reasoning without an
    opening one."""
    reader = Reader(text, id_salt)
    if dialect == "auto":
        took = read_reasoning(reader, MAGISTRAL + THINK, implicit=implicit)
        detected = detect_dialect(text[reader.pos :])
        if detected is None:
            return reader.result(), took
        chosen = DIALECTS[detected]
    else:
        chosen = resolve_dialect(dialect)
        took = read_reasoning(reader, chosen.reasoning, implicit=implicit)
    reader.alphanumeric9_ids = chosen.alphanumeric9_ids
    reader.end_tokens = chosen.end_tokens
    chosen.read(reader)
    return reader.result(chosen.name), took
