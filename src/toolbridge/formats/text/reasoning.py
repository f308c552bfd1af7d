"""Reasoning that open models write before their answer, split off before any call is read.

Qwen3, QwQ, DeepSeek R1/V3.1, Kimi K2 Thinking, MiniMax and others wrap it in
``<think>…</think>``; Magistral uses ``[THINK]…[/THINK]``. Chat templates often put the
opening tag in the prompt, so the generated text has only the closing one: everything
before it is then reasoning. A reply cut off while thinking is reasoning to its end.
Reasoning is never read for calls, whatever it contains.
"""

from __future__ import annotations

from toolbridge.formats.text._common import Reader, first_of, skip_space

__all__ = ["MAGISTRAL", "THINK", "read_reasoning"]

ReasoningTags = tuple[tuple[str, str], ...]
THINK: ReasoningTags = (("<think>", "</think>"),)
MAGISTRAL: ReasoningTags = (("[THINK]", "[/THINK]"),)


def read_reasoning(reader: Reader, tags: ReasoningTags, *, implicit: bool = True) -> str | None:
    """Account for the reasoning at the start of the reply (if any) as reasoning and markup;
    the closing tag when it was taken without an opening tag (the `implicit` rule).

    The reasoning is what follows an opening tag that starts the reply, up to its
    closing tag (or the end of a cut-off reply); without an opening tag, everything
    before the first closing tag (the opening tag was in the prompt), unless `implicit`
    is False. The whitespace after the closing tag is the template's separator, not
    reply text.
    """
    if not tags:
        return None
    source = reader.source
    start = skip_space(source, reader.pos)
    for opening, closing in tags:
        if source.startswith(opening, start):
            reader.markup(start + len(opening))
            end = source.find(closing, reader.pos)
            if end == -1:
                reader.reasoning(len(source))
                return None
            reader.reasoning(end)
            reader.markup(skip_space(source, end + len(closing)))
            return None
    if not implicit:
        return None
    end, closing = first_of(source, tuple(close for _, close in tags), reader.pos)
    if not closing:
        return None
    reader.reasoning(end)
    reader.markup(skip_space(source, end + len(closing)))
    return closing
