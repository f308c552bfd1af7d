"""What every raw-text dialect shares: the result type, the `Reader` that walks one reply
and accounts for every character of it, and a string-aware JSON scanner.

A dialect reader never builds the result itself: it tells the `Reader` what each stretch
of the input is (reply text, reasoning, framing markup, a call, an unreadable fragment),
in order. The `Reader` is the one place that checks a call before returning it (its name
must be a tool name, see `TOOL_NAME_PATTERN`), gives id-less calls their stable ids, and
assembles the text from exactly the stretches that were text, so nothing is stripped,
invented or lost.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from toolbridge.core.calls import ArgumentsDecodeError, ToolCallRequest, decode_arguments
from toolbridge.core.registry import TOOL_NAME_PATTERN
from toolbridge.formats.call_ids import generated_call_id

__all__ = [
    "Reader",
    "SpanKind",
    "TextCalls",
    "TextSpan",
    "arguments_until",
    "first_of",
    "scan_json",
    "shown",
    "skip_space",
]

_SCANNER = json.JSONDecoder()
_SHOWN = 80  # characters of a fragment quoted in a problem

SpanKind = Literal["text", "reasoning", "markup", "call"]


class TextSpan(NamedTuple):
    """One stretch ``input[start:end]`` of a reply and what it was read as.

    ``call`` spans match `TextCalls.calls` one to one, in order; ``markup`` is a
    dialect's framing (section markers, end-of-turn tokens, think tags, the
    whitespace between blocks). A named tuple: a reply of many calls makes many.
    """

    kind: SpanKind
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class TextCalls:
    """Tool calls found in generated text, and what is left once they are cut out.

    `text` is the reply text exactly as the model wrote it, without the calls, the
    reasoning and the dialect's framing. `problems` names every call-shaped piece that
    could not be read as a call, and why; that piece stays in `text` and is never run.
    `reasoning` is the model's thinking (``<think>…</think>``, the gpt-oss ``analysis``
    channel), never read for calls. `spans` cover the input end to end, in order.
    `dialect` is the dialect that read the reply (``""`` when ``auto`` found none).
    """

    calls: tuple[ToolCallRequest, ...]
    text: str
    problems: tuple[str, ...] = ()
    reasoning: str = ""
    spans: tuple[TextSpan, ...] = ()
    dialect: str = ""


def skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def scan_json(text: str, pos: int) -> tuple[str, int] | None:
    """The exact text of the JSON value starting at `pos` (after spaces) and its end.

    The scan is string-aware, so an end tag inside a JSON string does not end the value.
    None when no complete JSON value starts there.
    """
    start = skip_space(text, pos)
    try:
        _, end = _SCANNER.raw_decode(text, start)
    except (json.JSONDecodeError, RecursionError):
        return None
    return text[start:end], end


def arguments_until(text: str, pos: int, terminators: tuple[str, ...]) -> tuple[str, int]:
    """Argument text starting at `pos` and the position just after it.

    A complete JSON value is taken whole, so a terminator inside one of its strings does
    not cut it. Anything else (broken or cut-off JSON, or values run together like
    ``{..}{..}``) is returned raw, up to the first terminator, so that the registry
    reports it to the model instead of one part being run.
    """
    found = scan_json(text, pos)
    if found is not None:
        after = skip_space(text, found[1])
        if text.startswith(terminators, after) or not text.startswith(("{", "["), after):
            return found
    ends = [index for marker in terminators if (index := text.find(marker, pos)) != -1]
    end = min(ends, default=len(text))
    return text[pos:end].strip(), end


def shown(fragment: str) -> str:
    """A fragment quoted in a problem: its start, as a repr."""
    return repr(fragment[:_SHOWN] + ("…" if len(fragment) > _SHOWN else ""))


class Reader:
    """Walks one reply: everything before `pos` has been accounted for.

    Each method takes the stretch ``source[pos:end]``, records what it is, and moves
    `pos` to `end`; `result` makes whatever is left reply text. A span can only start
    where the previous one ended, so the spans tile the input by construction.
    """

    def __init__(self, source: str, id_salt: str = "") -> None:
        self.source = source
        self.pos = 0
        self._salt = id_salt
        # Mistral's nine-character ids for calls without one
        self.alphanumeric9_ids = False
        # special tokens (end of turn, stop sequences) that are framing wherever they are
        self.end_tokens: tuple[str, ...] = ()
        self.calls: list[ToolCallRequest] = []
        self.problems: list[str] = []
        self._spans: list[TextSpan] = []

    # --- stretches that are not calls ------------------------------------------------

    def text(self, end: int, orphans: tuple[str, ...] = ()) -> None:
        """Reply text up to `end`: the dialect's `end_tokens` in it are framing, and
        whitespace alone between two pieces of framing is framing too.

        A closing tag from `orphans` found in it (a ``</tool_call>`` with no opening
        one) is reported as a problem; the text stays as written.
        """
        end = min(end, len(self.source))
        while self.pos < end:
            token_at, token = _first_of(self.source, self.end_tokens, self.pos, end)
            self._plain_text(token_at, orphans)
            if token:
                self.markup(token_at + len(token))

    def _plain_text(self, end: int, orphans: tuple[str, ...]) -> None:
        stretch = self.source[self.pos : end]
        if not stretch:
            return
        for orphan in orphans:
            if orphan in stretch:
                self.problems.append(
                    f"{orphan} at position {self.pos + stretch.index(orphan)} has no opening "
                    "tag, so nothing there is read as a call"
                )
        after_text = bool(self._spans) and self._spans[-1].kind == "text"
        self._span("markup" if stretch.isspace() and not after_text else "text", end)

    def markup(self, end: int) -> None:
        self._span("markup", end)

    def reasoning(self, end: int) -> None:
        self._span("reasoning", end)

    def problem(self, why: str) -> None:
        """A problem that goes with the next `unreadable` stretch (several reasons)."""
        self.problems.append(why)

    def unreadable(self, end: int, why: str) -> None:
        """A call-shaped fragment that cannot be read: a problem, and it stays text."""
        self.problems.append(f"{why}: {shown(self.source[self.pos : end])}")
        self._span("text", end)

    # --- calls -------------------------------------------------------------------------

    def call(
        self,
        end: int,
        name: str,
        arguments: Any,
        call_id: str | None = None,
        *,
        where: str = "",
        id_basis: str | None = None,
    ) -> bool:
        """Record ``source[pos:end]`` as a call of `name`; `arguments` stay raw.

        A name that is not a tool name (empty, markup such as ``<function=a``, a
        namespace with nothing after it) is never returned as a call: the stretch
        becomes a problem and stays text. A generated id hashes `id_basis` (the call's
        own text) or else the arguments, and is flagged ``extra["generated_id"]``.
        """
        if not TOOL_NAME_PATTERN.match(name):
            self.unreadable(
                end,
                f"{where or f'call at position {self.pos}'}: {name[:_SHOWN]!r} is not a tool "
                "name (1-64 letters, digits, '_' or '-'), so the call is not run",
            )
            return False
        extra: dict[str, Any] = {}
        if not call_id:
            extra["generated_id"] = True
            call_id = generated_call_id(
                len(self.calls),
                name,
                arguments if id_basis is None else id_basis,
                salt=self._salt,
                alphanumeric9=self.alphanumeric9_ids,
            )
        self.calls.append(ToolCallRequest(call_id, name, arguments, extra))
        self._span("call", end)
        return True

    def call_object(self, end: int, json_text: str, where: str) -> bool:
        """Record a call written as ``{"name": …, "arguments"|"parameters": …}``.

        On anything else the stretch is a problem (and stays text); returns whether a
        call was recorded.
        """
        try:
            value = decode_arguments(json_text)
        except ArgumentsDecodeError as exc:
            self.unreadable(end, f"{where}: the call's JSON is not valid ({exc})")
            return False
        if not isinstance(value, dict) or not isinstance(value.get("name"), str):
            self.unreadable(end, f'{where}: expected an object with a string "name"')
            return False
        if "arguments" in value and "parameters" in value:
            self.unreadable(end, f'{where}: the call has both "arguments" and "parameters"')
            return False
        arguments = value.get("arguments", value.get("parameters"))
        call_id = value.get("id") if isinstance(value.get("id"), str) else None
        return self.call(
            end,
            value["name"],
            {} if arguments is None else arguments,
            call_id,
            where=where,
            id_basis=json_text,
        )

    # --- the result --------------------------------------------------------------------

    def result(self, dialect: str = "") -> TextCalls:
        if self.pos < len(self.source):
            self.text(len(self.source))
        text = "".join(self.source[s.start : s.end] for s in self._spans if s.kind == "text")
        reasoning = "".join(
            self.source[s.start : s.end] for s in self._spans if s.kind == "reasoning"
        )
        return TextCalls(
            tuple(self.calls),
            text,
            tuple(self.problems),
            reasoning,
            tuple(self._spans),
            dialect,
        )

    def _span(self, kind: SpanKind, end: int) -> None:
        """Record ``source[pos:end]`` as `kind`; runs of one kind (but calls) merge."""
        end = max(self.pos, min(end, len(self.source)))
        if end == self.pos:
            return
        if self._spans and self._spans[-1].kind == kind and kind != "call":
            self._spans[-1] = TextSpan(kind, self._spans[-1].start, end)
        else:
            self._spans.append(TextSpan(kind, self.pos, end))
        self.pos = end


def _first_of(text: str, markers: tuple[str, ...], pos: int, end: int) -> tuple[int, str]:
    """The first of `markers` in ``text[pos:end]`` and where it starts; ``(end, "")``
    when there is none."""
    best, found = end, ""
    for marker in markers:
        index = text.find(marker, pos, end)
        if index != -1 and index < best:
            best, found = index, marker
    return best, found


def first_of(text: str, markers: tuple[str, ...], pos: int) -> tuple[int, str]:
    """The first of `markers` in ``text[pos:]``: ``(index, marker)``, or ``(-1, "")``."""
    index, marker = _first_of(text, markers, pos, len(text))
    return (index, marker) if marker else (-1, "")
