"""The statements of a PostgreSQL journal's writer batch: a batch's claims, starts and
finishes in one set-based statement over ``unnest`` arrays, one round trip.
"""

from __future__ import annotations

from toolbridge.journal.records import CallKey
from toolbridge.journal.rows import COLUMNS

__all__ = ["KEY", "KEYS", "key_columns", "qualified", "write_sql"]

KEY = "c.session = u.s AND c.call_id = u.c AND c.args_hash = u.h"
KEYS = "unnest(%(s)b::text[], %(c)b::text[], %(h)b::text[])"


_CLAIMED = (
    f"INSERT INTO toolbridge_calls AS c ({COLUMNS}, owner) "
    "SELECT s, c, h, t, a::jsonb, q, 1, NULL, NULL, p::jsonb, %(now)s, "
    "CASE WHEN q = 'queued' THEN NULL ELSE %(now)s END, NULL, %(owner)s "
    "FROM unnest(%(s)b::text[], %(c)b::text[], %(h)b::text[], %(t)b::text[], "
    "%(a)b::text[], %(p)b::text[], %(q)b::text[]) AS u(s, c, h, t, a, p, q) "
    "ON CONFLICT DO NOTHING RETURNING 1"
)
_STARTED = (
    "UPDATE toolbridge_calls AS c SET state = 'running', started_at = %(now)s "
    "FROM unnest(%(ss)b::text[], %(sc)b::text[], %(sh)b::text[]) AS u(s, c, h) "
    f"WHERE {KEY} AND c.owner = %(owner)s AND c.state = 'queued' RETURNING 1"
)
_FINISHED = (
    "UPDATE toolbridge_calls AS c SET state = 'finished', outcome = u.o::jsonb, "
    "error_kind = u.e, finished_at = %(now)s, owner = NULL "
    "FROM unnest(%(fs)b::text[], %(fc)b::text[], %(fh)b::text[], %(fo)b::text[], "
    f"%(fe)b::text[]) AS u(s, c, h, o, e) WHERE {KEY} AND c.owner = %(owner)s RETURNING 1"
)


def write_sql(*, claims: bool, starts: bool, finishes: bool) -> str:
    """The one statement of a writer batch: its claims (one row per call, inserted unless
    the call is stored already), its starts (queued calls marked running) and its
    outcomes, those it has, in one round trip and one transaction. It answers how many
    rows were claimed and how many finished; only those counts come back."""
    parts = [f"{name} AS ({sql})" for name, sql, wanted in (
        ("claimed", _CLAIMED, claims), ("started", _STARTED, starts),
        ("finished", _FINISHED, finishes)) if wanted]  # fmt: skip
    claimed = "(SELECT count(*) FROM claimed)" if claims else "0"
    finished = "(SELECT count(*) FROM finished)" if finishes else "0"
    return f"WITH {', '.join(parts)} SELECT {claimed}, {finished}"


def key_columns(keys: list[CallKey], prefix: str = "") -> dict[str, list[str]]:
    """The parameters of `keys` as three arrays (sessions, call ids, digests), named
    `prefix` + ``s``, ``c``, ``h`` as `KEYS` and the batch statement read them."""
    return {
        f"{prefix}s": [key.session for key in keys],
        f"{prefix}c": [key.call_id for key in keys],
        f"{prefix}h": [key.args_hash for key in keys],
    }


def qualified(columns: str) -> str:
    """`columns` (such as `COLUMNS`) of the calls table as ``c`` names them."""
    return ", ".join(f"c.{name.strip()}" for name in columns.split(","))
