"""Tool calls written in generated text, for open-weight models served without a
tool-call parser: Hermes/Qwen, Qwen3-Coder, Llama 3.x, pythonic, Mistral, DeepSeek
V3/V3.1, Kimi K2 and gpt-oss harmony.

Every dialect returns the calls (`ToolCallRequest`, with a stable generated id where
the text has none) and the remaining text. Arguments are never repaired: broken or
cut-off argument text goes to the registry as it is, which tells the model what is
wrong; pieces that cannot even be read as a call are listed in `TextCalls.problems`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from toolbridge.formats.text._common import TextCalls
from toolbridge.formats.text.deepseek import CALL_BEGIN as DEEPSEEK_CALL_BEGIN
from toolbridge.formats.text.deepseek import parse_deepseek
from toolbridge.formats.text.harmony import parse_harmony
from toolbridge.formats.text.kimi import CALL_BEGIN as KIMI_CALL_BEGIN
from toolbridge.formats.text.kimi import parse_kimi_k2
from toolbridge.formats.text.llama import PYTHON_TAG, parse_llama3_json
from toolbridge.formats.text.mistral import TOOL_CALLS, parse_mistral
from toolbridge.formats.text.pythonic import parse_pythonic
from toolbridge.formats.text.tagged import START as TOOL_CALL_START
from toolbridge.formats.text.tagged import parse_hermes, parse_qwen3_coder

__all__ = [
    "DIALECTS",
    "TextCalls",
    "TextParser",
    "detect_dialect",
    "parse_text_calls",
]

TextParser = Callable[..., TextCalls]
"""``parser(text, *, id_salt="") -> TextCalls``."""

DIALECTS: Mapping[str, TextParser] = MappingProxyType(
    {
        "hermes": parse_hermes,
        "qwen3_coder": parse_qwen3_coder,
        "llama3_json": parse_llama3_json,
        "pythonic": parse_pythonic,
        "mistral": parse_mistral,
        "deepseek_v3": parse_deepseek,
        "kimi_k2": parse_kimi_k2,
        "harmony": parse_harmony,
    }
)


def detect_dialect(text: str) -> str | None:
    """The dialect whose markers the text carries, or None when it shows none.

    Marker-less dialects are recognised by shape: a reply that is a ``[f(…)]`` list is
    pythonic, one that starts with ``{"name"`` is Llama JSON.
    """
    if "<|message|>" in text and ("<|channel|>" in text or "to=" in text):
        return "harmony"
    if KIMI_CALL_BEGIN in text:
        return "kimi_k2"
    if DEEPSEEK_CALL_BEGIN in text:
        return "deepseek_v3"
    if TOOL_CALLS in text:
        return "mistral"
    start = text.find(TOOL_CALL_START)
    if start != -1:
        after = text[start + len(TOOL_CALL_START) :].lstrip()
        return "qwen3_coder" if after.startswith("<function=") else "hermes"
    body = text.strip()
    if body.startswith(PYTHON_TAG) or (body.startswith("{") and '"name"' in body):
        return "llama3_json"
    if body.startswith(("[", "<|python_start|>")) and "(" in body:
        return "pythonic"
    return None


def parse_text_calls(text: str, dialect: str = "auto", *, id_salt: str = "") -> TextCalls:
    """Calls and remaining text of one reply in `dialect` (a name from `DIALECTS`).

    With ``"auto"`` the dialect is detected from the text; text without any dialect's
    markers comes back whole, with no calls.
    """
    if dialect == "auto":
        detected = detect_dialect(text)
        if detected is None:
            return TextCalls((), text.strip())
        dialect = detected
    parser = DIALECTS.get(dialect)
    if parser is None:
        raise ValueError(
            f"unknown dialect {dialect!r}; use 'auto' or one of: {', '.join(DIALECTS)}"
        )
    return parser(text, id_salt=id_salt)
