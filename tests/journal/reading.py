"""A value read from a journal's database by a connection of its own: a reader's view."""

from __future__ import annotations

import sqlite3
from typing import Any


def read_one(target: str, sql: str) -> Any:
    """The first column of the first row `sql` gives in the journal at `target` (a SQLite
    file, or a ``postgresql://`` URL), read by a connection of its own."""
    if target.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(target) as conn:
            row = conn.execute(sql.encode()).fetchone()
    else:
        with sqlite3.connect(target) as conn:
            row = conn.execute(sql).fetchone()
        conn.close()
    assert row is not None
    return row[0]
