"""How a call is written to a row and read back, the same on both backends.

The stored columns and their order, the JSON text of arguments, outcomes, approvals and
run states (with what JSON has no form for), what a key may hold, and a row read back as a
`JournalEntry`. A backend picks its `RowCodec` (`TEXT` for SQLite's text columns, `JSONB`
for PostgreSQL's) and keeps only its SQL.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolbridge.core.jsontext import compact_encoder
from toolbridge.journal.records import (
    CallKey,
    CallState,
    JournalEntry,
    JournalError,
    UnstorableKey,
)

__all__ = [
    "COLUMNS",
    "JSONB",
    "LISTING_INDEX",
    "LISTING_ORDER",
    "SESSIONS_QUERY",
    "SURROGATE",
    "TEXT",
    "NewCall",
    "RowCodec",
    "check_storable",
    "entry_from_row",
    "jsonb",
    "loads",
    "named_numbers",
    "page_after",
    "page_condition",
    "to_json",
]


SURROGATE = re.compile("[\ud800-\udfff]")
"""A lone surrogate: text decoded with ``surrogateescape``, never UTF-8."""


def to_json(value: Any) -> str:
    """Compact JSON text for a stored value; anything JSON cannot hold is stored as its repr.

    What JSON has no form for is stored in the nearest form it has, the same on every
    backend, so the stored text is JSON any reader (jq, PostgreSQL's JSONB) accepts: NaN
    and infinities by name (the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``), and
    a lone surrogate (text decoded with ``surrogateescape``, such as a file name that is
    not UTF-8) as U+FFFD, the character of undecodable text. A value with no JSON at all
    (one that holds itself) is a `JournalError` of its own call.
    """
    try:
        try:
            text = _dumps(value)
        except (ValueError, TypeError):  # NaN, an infinity, a key not text, or a loop
            text = _dumps(named_numbers(value))
    except (ValueError, TypeError, RecursionError) as exc:
        raise JournalError(
            f"the value cannot be stored in the journal as JSON ({exc}); store plain data "
            "(objects, arrays, text, numbers) that does not contain itself"
        ) from None
    if not text.isascii() and SURROGATE.search(text) is not None:
        return SURROGATE.sub("\ufffd", text)
    return text


def _repr(value: Any) -> str:
    """What JSON cannot hold, as its repr; a repr that fails is not the caller's problem
    (a refused call's hostile arguments are still recorded)."""
    try:
        return repr(value)
    except Exception as exc:
        return f"<{type(value).__name__} object (its repr failed: {type(exc).__name__})>"


_dumps = compact_encoder(default=_repr, allow_nan=False)


def named_numbers(value: Any, within: set[int] | None = None) -> Any:
    """`value` with every NaN or infinite float replaced by its name, and every object
    key JSON cannot hold (a tuple) by its repr. A value that holds itself is a
    `ValueError` at once (`within`: the containers walked into), not a walk to the
    recursion limit (seconds at a raised limit). How stored JSON holds what it has no form
    for (`to_json`), and how `journal export` writes a record an older toolbridge stored
    with bare NaN."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if not isinstance(value, dict | list | tuple):
        return value
    within = set() if within is None else within
    if id(value) in within:
        raise ValueError("the value holds itself")
    within.add(id(value))
    try:
        if isinstance(value, dict):
            return {
                key if isinstance(key, str | int | float | bool | None) else _repr(key): (
                    named_numbers(item, within)
                )
                for key, item in value.items()
            }
        return [named_numbers(item, within) for item in value]
    finally:
        within.discard(id(value))


COLUMNS = (
    "session, call_id, args_hash, tool, arguments, state, attempt, outcome, error_kind, "
    "approval, created_at, started_at, finished_at"
)
"""The stored columns of a call, in the order `entry_from_row` reads them."""

LISTING_ORDER = "created_at, session, call_id, args_hash"
"""The order of a listing (oldest first), the same on both backends; a page goes on after
the last entry of the one before by comparing these columns as a row."""

SESSION_ORDER = "created_at, call_id, args_hash"
"""`LISTING_ORDER` within one session (its session is the same on every row): a page of a
session's listing goes on after the last entry of the one before by comparing these
columns as a row, which `LISTING_INDEX` seeks to."""

LISTING_INDEX = (
    "CREATE INDEX IF NOT EXISTS toolbridge_calls_by_session "
    "ON toolbridge_calls (session, created_at, call_id, args_hash)"
)
"""The index a session's listing reads in its order: a page is a seek and `limit` rows,
where without it each page sorted the session's remaining rows (a session's export read
it once per page). Made when a journal is opened to write, not by a migration: it changes
no row's meaning and an older toolbridge reads and writes a journal that has it, so the
schema version (which locks older processes out) stays. Without it (a journal opened
only to read, that no process of this version has opened to write) a listing is the
same, only slower."""

SESSIONS_QUERY = (
    "SELECT session, MAX(t) FROM ("
    " SELECT session, COALESCE(finished_at, started_at, created_at) AS t"
    " FROM toolbridge_calls"
    " UNION ALL SELECT session, updated_at FROM toolbridge_runs"
    ") AS activity GROUP BY session ORDER BY MAX(t) DESC, session"
)
"""Every session with a call or a run, newest change first: the same SQL on both backends."""


def session_from_row(name: Any, when: Any, where: str) -> tuple[str, float]:
    """A row of `SESSIONS_QUERY` (or of a count, `when` its number); a value another
    program stored there (bytes, a time that is no number) is a `JournalError` naming
    the journal `where`, as `entry_from_row` says of a damaged call."""
    try:
        return _text(name), _time(when)
    except (ValueError, TypeError) as exc:
        raise JournalError(
            f"the journal {where} holds a record of session {name!r} it cannot read "
            f"({exc}); the file was damaged or edited. Remove that session's rows, or "
            "move the journal aside to start a new one."
        ) from None


def entry_from_row(row: Sequence[Any], decode: Callable[[Any], Any]) -> JournalEntry:
    """A `JournalEntry` from a row of `COLUMNS`; `decode` turns a stored JSON value into data
    (SQLite stores text, PostgreSQL's JSONB arrives decoded). A row damaged on disk is a
    `JournalError` naming the call, never a crash of the journal's writer."""
    try:
        return _entry(row, decode)
    except (ValueError, TypeError, RecursionError) as exc:  # JSON nested past any reader
        raise JournalError(
            f"the journal holds a record of call {row[1]!r} (session {row[0]!r}) it cannot "
            f"read ({exc}); the file was damaged or edited. Remove that row, or move the "
            "journal aside to start a new one."
        ) from None


def _entry(row: Sequence[Any], decode: Callable[[Any], Any]) -> JournalEntry:
    return JournalEntry(
        key=CallKey(_text(row[0]), _text(row[1]), _text(row[2])),
        tool=_text(row[3]),
        arguments=decode(row[4]),
        state=CallState(row[5]),
        attempt=int(row[6]),
        outcome=decode(row[7]) if row[7] is not None else None,
        error_kind=_text(row[8]) if row[8] is not None else None,
        approval=_approval(decode(row[9])) if row[9] is not None else None,
        created_at=_time(row[10]),
        started_at=_time(row[11]) if row[11] is not None else None,
        finished_at=_time(row[12]) if row[12] is not None else None,
    )


LONGEST_KEY_TEXT = 1000
"""The most characters of a session, call id or tool name a claim stores (both backends):
PostgreSQL's index holds about 2.7 kB a row, and one call over it would fail its batch."""


def _text(value: Any) -> str:
    """A stored text column as it must be: text (another program can store bytes there)."""
    if not isinstance(value, str):
        raise TypeError(f"a text column holds {type(value).__name__}")
    return value


def _time(value: Any) -> float:
    """A stored time as it must be: a finite number of seconds (JSON has no NaN)."""
    when = float(value)
    if not math.isfinite(when):
        raise ValueError(f"a time is {when}")
    return when


def _approval(value: Any) -> dict[str, Any]:
    """A stored approval as it must be: a JSON object."""
    if not isinstance(value, dict):
        raise TypeError(f"its approval is {type(value).__name__}, not an object")
    return value


def check_storable(key: CallKey, tool: str, *, nul: bool) -> None:
    """Refuse, before it reaches the database, a claim whose session, call id or tool name
    the database cannot store: a lone surrogate (text decoded with ``surrogateescape``)
    is never UTF-8, and PostgreSQL's text holds no NUL (`nul` False). Storing it changed
    would let two calls share one record, so it is an error of that claim alone."""
    session, call_id = key.session, key.call_id
    if (  # the common case, checked at once: three short texts of plain characters
        type(session) is type(call_id) is type(tool) is str
        and len(joined := session + call_id + tool) <= LONGEST_KEY_TEXT
        and joined.isascii()
        and (nul or "\x00" not in joined)
    ):
        return
    for part, text in (("session", key.session), ("call id", key.call_id), ("tool name", tool)):
        if not isinstance(text, str):  # hostile input the type hints did not stop
            raise UnstorableKey(
                f"call {key.call_id!r} of session {key.session!r} cannot be stored in the "
                f"journal: its {part} is not text ({type(text).__name__}). Use a string.",
                part,
            )
        if len(text) > LONGEST_KEY_TEXT:  # PostgreSQL's index holds about 2.7 kB a row
            raise UnstorableKey(
                f"call {key.call_id[:40]!r}... of session "
                f"{key.session[:40]!r} cannot be stored in the journal: its {part} is "
                f"{len(text)} characters long, and the journal keeps at most "
                f"{LONGEST_KEY_TEXT} in a key. Use a shorter {part}.",
                part,
            )
        if text.isascii() and (nul or "\x00" not in text):
            continue
        if not nul and "\x00" in text:
            problem = "holds NUL, which this database cannot store"
        else:
            try:
                text.encode("utf-8")
                continue
            except UnicodeEncodeError:
                problem = "is not valid Unicode (a lone surrogate: text decoded from bytes "
                problem += "that are not UTF-8)"
        raise UnstorableKey(
            f"call {key.call_id!r} of session {key.session!r} cannot be stored in the "
            f"journal: its {part} {problem}. Use text that is valid UTF-8.",
            part,
        )


def loads(text: str) -> Any:
    """A stored JSON value; a ValueError for text that was not UTF-8 on disk."""
    if not text.isascii() and SURROGATE.search(text) is not None:
        raise ValueError("its text is not UTF-8")
    return json.loads(text)


_NUL_ESCAPE = re.compile(r"(\\+)u0000")


def jsonb(value: Any) -> str:
    """`to_json` text that JSONB accepts: NUL (``\\u0000``, which JSONB refuses in a
    string) as U+FFFD, like lone surrogates."""
    return _jsonb_text(to_json(value))


def _jsonb_text(text: str) -> str:
    """JSON `text` that JSONB accepts (see `jsonb`)."""
    if "\\u0000" in text:
        # An odd run of backslashes before u0000 is the escape of NUL; an even run is
        # escaped backslashes followed by the letters "u0000".
        return _NUL_ESCAPE.sub(lambda m: m[0] if len(m[1]) % 2 == 0 else m[1] + "ufffd", text)
    return text


def _as_is(value: Any) -> Any:
    """JSONB arrives decoded."""
    return value


def page_after(after: JournalEntry) -> tuple[float, str, str, str]:
    """The `LISTING_ORDER` values of `after`: the next page starts past the row holding them."""
    return (after.created_at, *after.key)


def page_condition(session: str | None, after: JournalEntry) -> tuple[str, tuple[Any, ...]]:
    """The columns a page of the listing of `session` (None: every session) compares as a
    row, and the values it goes on past: within the session of `after`, `SESSION_ORDER`
    (which `LISTING_INDEX` seeks to); otherwise all of `LISTING_ORDER`, the same rows."""
    if session is not None and after.key.session == session:
        return SESSION_ORDER, (after.created_at, after.key.call_id, after.key.args_hash)
    return LISTING_ORDER, page_after(after)


@dataclass(slots=True)
class NewCall:
    """A claim as it asks to be stored: the call, and its JSON values as the text its
    backend stores, written by the caller (a value that cannot be stored fails its call
    only)."""

    key: CallKey
    tool: str
    arguments: Any
    approval: Mapping[str, Any] | None
    arguments_text: str
    approval_text: str | None
    queued: bool = False


@dataclass(frozen=True, slots=True)
class RowCodec:
    """How one backend stores JSON values: `dumps` writes a column's text, `loads` reads a
    column back (SQLite stores text; PostgreSQL's JSONB arrives decoded), and `nul` says
    whether its text columns hold NUL."""

    dumps: Callable[[Any], str]
    loads: Callable[[Any], Any]
    nul: bool
    text: Callable[[str], str] | None
    """How it stores JSON text written already (`ClaimRequest.arguments_text`); None: as
    it is."""

    def entry(self, row: Sequence[Any]) -> JournalEntry:
        """The `JournalEntry` of a row of `COLUMNS` (see `entry_from_row`)."""
        return entry_from_row(row, self.loads)

    def approval(self, approval: Mapping[str, Any] | None) -> str | None:
        """An approval's text; None when there is none."""
        return self.dumps(approval) if approval else None

    def new_call(
        self,
        key: CallKey,
        tool: str,
        arguments: Any,
        approval: Mapping[str, Any] | None,
        *,
        queued: bool,
        arguments_text: str | None = None,
    ) -> NewCall:
        """A claim's values, refused (`UnstorableKey`) before the database sees a key it
        cannot hold (`arguments_text`: see `claim_texts`)."""
        texts = self.claim_texts(key, tool, arguments, approval, arguments_text)
        return NewCall(key, tool, arguments, approval, *texts, queued)

    def claim_texts(
        self,
        key: CallKey,
        tool: str,
        arguments: Any,
        approval: Mapping[str, Any] | None,
        arguments_text: str | None = None,
    ) -> tuple[str, str | None]:
        """The texts a claim stores, its arguments' (`arguments_text` when given: see
        `ClaimRequest`) and its approval's (None: none), its key checked first (see
        `new_call`)."""
        check_storable(key, tool, nul=self.nul)
        if arguments_text is None:
            stored = self.dumps(arguments)
        else:
            stored = arguments_text if self.text is None else self.text(arguments_text)
        return stored, self.dumps(approval) if approval else None

    def refusal(
        self, key: CallKey, tool: str, arguments: Any, outcome: Mapping[str, Any]
    ) -> tuple[str, str]:
        """The texts of a refused call's arguments and outcome, its key checked first."""
        check_storable(key, tool, nul=self.nul)
        return self.dumps(arguments), self.dumps(outcome)


TEXT = RowCodec(to_json, loads, nul=True, text=None)
"""SQLite: JSON as text, read back with `loads`; its text holds NUL."""

JSONB = RowCodec(jsonb, _as_is, nul=False, text=_jsonb_text)
"""PostgreSQL: JSONB, which refuses NUL (in a value: stored as U+FFFD; in a key: refused)."""
