"""The statements of a PostgreSQL journal's writer batch: a batch's claims, starts and
finishes in one set-based statement over ``unnest`` arrays, one round trip.

Every keyed statement (a batch's starts and outcomes, and the writer's reads and releases
of stored rows) joins the keys of its arrays to the table. Planning one for its values,
the planner misjudged two things: it counted the keys (200 probes priced above a scan of a
table of up to about 35,000 rows), and it took the rows of the batch's owner, or of a
state such as queued, for one or none, from statistics older than the rows the batch
claimed (and every journal has an owner number of its own), so it tested every key
against each row of the table in a nested loop: 10-20 ms a statement instead of 2-3, at
2,000 rows as at 12,000. A journal's connection plans each statement so for its first ten
runs (psycopg then prepares it, and the server may keep a generic plan). So the arrays are
read through scalar subqueries (`array`: the planner takes them for a handful of keys, its
default of 10) and the conditions on the table's own columns are tied to the keys (`kept`:
no estimate from the table's statistics alone).

At 10 keys the planner still priced their probes (8 each: two random pages at the
default ``random_page_cost``) above a scan of a table of up to about 3,000 rows, read once
into a hash join; and it takes a table never vacuumed for 10 pages, whatever its size.
So in a journal's first minute (before autovacuum analyzes the table) a prepared
statement settled on that scan and kept it as the table grew: under ``max_concurrency=6``
each slot hand-over's starts and outcomes read every row of the table twice, 1.5 ms at
1,800 rows, more with every batch. So `KEY` also requires each key's texts to be at least
the empty text, which every text is: the planner prices each such test at a third and so
takes the keys for one, whose probe costs less than a scan of any table of more than a
few pages. It probes the primary key per key, in plans for the values and generic plans
alike, from a table of a few hundred rows to millions.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from toolbridge.journal.records import CallKey
from toolbridge.journal.rows import COLUMNS

__all__ = [
    "KEY",
    "KEYS",
    "TEXT_ARRAY_OID",
    "TextArray",
    "array",
    "kept",
    "key_columns",
    "qualified",
    "text_array",
    "write_sql",
]


def array(name: str) -> str:
    """The text array parameter `name` as a keyed statement reads it: through a scalar
    subquery, so the planner does not count its elements (see the module's docstring)."""
    return f"(SELECT %({name})b::text[])"


def kept(condition: str) -> str:
    """`condition` on the table's columns (``c``) as a keyed statement tests it: tied to the
    keys (``u``) so the planner cannot estimate it from the table's statistics alone (see
    the module's docstring). The same rows pass: a key whose session is null matches none."""
    return f"({condition} OR u.s IS NULL)"


KEY = (
    "c.session = u.s AND c.call_id = u.c AND c.args_hash = u.h "
    "AND u.s >= '' AND u.c >= '' AND u.h >= ''"  # true of every key: see the docstring
)
KEYS = f"unnest({array('s')}, {array('c')}, {array('h')})"


_CLAIMED = (
    f"INSERT INTO toolbridge_calls AS c ({COLUMNS}, owner) "
    "SELECT s, c, h, t, a::jsonb, q, 1, NULL, NULL, p::jsonb, %(now)s, "
    "CASE WHEN q = 'queued' THEN NULL ELSE %(now)s END, NULL, %(owner)s "
    "FROM unnest(%(s)b::text[], %(c)b::text[], %(h)b::text[], %(t)b::text[], "
    "%(a)b::text[], %(p)b::text[], %(q)b::text[]) AS u(s, c, h, t, a, p, q) "
    "ON CONFLICT DO NOTHING RETURNING 1"
)
_QUEUED = "c.owner = %(owner)s AND c.state = 'queued'"
_STARTED = (
    "UPDATE toolbridge_calls AS c SET state = 'running', started_at = %(now)s "
    f"FROM unnest({array('ss')}, {array('sc')}, {array('sh')}) AS u(s, c, h) "
    f"WHERE {KEY} AND {kept(_QUEUED)} RETURNING 1"
)
_FINISHED = (
    "UPDATE toolbridge_calls AS c SET state = 'finished', outcome = u.o::jsonb, "
    "error_kind = u.e, finished_at = %(now)s, owner = NULL "
    f"FROM unnest({', '.join(array(name) for name in ('fs', 'fc', 'fh', 'fo', 'fe'))}) "
    f"AS u(s, c, h, o, e) WHERE {KEY} AND {kept('c.owner = %(owner)s')} RETURNING 1"
)


def write_sql(*, claims: bool, starts: bool, finishes: bool) -> str:
    """A statement of a writer batch: its claims (one row per call, inserted unless the
    call is stored already), its starts (queued calls marked running) and its outcomes,
    those asked for, in one round trip and one transaction (the writer sends a batch's
    starts on their own, then its claims and outcomes). It answers how many rows were
    claimed and how many finished; only those counts come back."""
    parts = [f"{name} AS ({sql})" for name, sql, wanted in (
        ("claimed", _CLAIMED, claims), ("started", _STARTED, starts),
        ("finished", _FINISHED, finishes)) if wanted]  # fmt: skip
    claimed = "(SELECT count(*) FROM claimed)" if claims else "0"
    finished = "(SELECT count(*) FROM finished)" if finishes else "0"
    return f"WITH {', '.join(parts)} SELECT {claimed}, {finished}"


def key_columns(keys: list[CallKey], prefix: str = "") -> dict[str, TextArray]:
    """The parameters of `keys` as three arrays (sessions, call ids, digests), named
    `prefix` + ``s``, ``c``, ``h`` as `KEYS` and the batch statement read them."""
    return {
        f"{prefix}s": text_array([key.session for key in keys]),
        f"{prefix}c": text_array([key.call_id for key in keys]),
        f"{prefix}h": text_array([key.args_hash for key in keys]),
    }


TEXT_ARRAY_OID = 1009
"""PostgreSQL's ``text[]``."""
_TEXT_OID = 25


class TextArray(bytes):
    """A ``text[]`` parameter already in PostgreSQL's binary form (`text_array`): the
    journal's connection sends it as it is (`postgres_connection` registers its dumper).

    psycopg dumps a list of texts element by element in Python (a call to the element's
    dumper, a length packed, two appends: about 0.5 µs an element); a writer batch of 200
    claims and 200 outcomes sends 12 such arrays. `text_array` builds the same bytes
    with a few passes in C over the whole array."""

    __slots__ = ()


_INT = struct.Struct(">i").pack
_HEAD = struct.Struct(">iiiii").pack  # dimensions, has nulls, element type; length, lower bound
_NULL = _INT(-1)
_SHORT = 4096
_LENGTHS = [_INT(length).decode("latin-1") for length in range(_SHORT)]
"""The 4-byte length of an element shorter than `_SHORT`, as the latin-1 text of its bytes."""


def text_array(items: Sequence[str | None]) -> TextArray:
    """`items` as a binary ``text[]`` of one dimension (None: NULL), the bytes psycopg's
    binary list dumper makes of them (see `TextArray`). A text that is not valid UTF-8 (a
    lone surrogate) raises `UnicodeEncodeError` (a `ValueError`), as it fails in psycopg."""
    count = len(items)
    if not count:
        return TextArray(_INT(0) + _INT(0) + _INT(_TEXT_OID))
    try:
        joined = "".join(items)  # type: ignore[arg-type]  # a None raises TypeError
    except TypeError:
        if items.count(None) == count:  # no approval, no error kind: all NULL
            return TextArray(_HEAD(1, 1, _TEXT_OID, count, 1) + _NULL * count)
        return _one_by_one(items)
    if joined.isascii():  # the common case: each element's bytes are its characters
        parts: list[str] = [""] * (2 * count)
        try:
            parts[0::2] = map(_LENGTHS.__getitem__, map(len, items))  # type: ignore[arg-type]
        except IndexError:  # an element of 4 kB or more
            return _one_by_one(items)
        parts[1::2] = items  # type: ignore[assignment]
        return TextArray(_HEAD(1, 0, _TEXT_OID, count, 1) + "".join(parts).encode("latin-1"))
    return _one_by_one(items)


def _one_by_one(items: Sequence[str | None]) -> TextArray:
    """`text_array` element by element: any text, None as NULL."""
    parts = [b""]
    nulls = 0
    for item in items:
        if item is None:
            parts.append(_NULL)
            nulls = 1
        elif not isinstance(item, str):
            raise TypeError(f"a text array holds {type(item).__name__}")
        else:
            data = item.encode()
            parts.append(_INT(len(data)))
            parts.append(data)
    parts[0] = _HEAD(1, nulls, _TEXT_OID, len(items), 1)
    return TextArray(b"".join(parts))


def qualified(columns: str) -> str:
    """`columns` (such as `COLUMNS`) of the calls table as ``c`` names them."""
    return ", ".join(f"c.{name.strip()}" for name in columns.split(","))
