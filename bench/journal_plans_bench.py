"""The PostgreSQL journal's batch statements before and after they were written to probe the
primary key, at table sizes from empty to 100,000 rows (issue 20).

    python bench/journal_plans_bench.py [--rounds 20] [--sizes 0,2000,12000,35000,100000]

One throwaway cluster (as the journal tests start it), the journal's own table filled to
each size with finished calls nobody owns and analyzed (as autovacuum leaves it; it is
off for the table during the run, so each pass starts from the same statistics). At each
size, rounds interleaved and their order alternating, each variant sends the statements
of a 200-call batch as the writer does, with the values it binds: the claims (queued),
the starts, then the outcomes, each its own round trip, under an owner number of its own
that the statistics have never seen (as a journal's is), then the batch's rows are
deleted, so the table keeps its size. ``before`` is the statements' text as it was (kept
below), ``after`` is `postgres_sql.write_sql` now. Both durabilities: ``process``
(``synchronous_commit = off``) and ``power`` (on). Each variant runs on new connections
(as a journal just opened): printed, the median ms per statement in the first 10 batches
(planned for their values) and in the later ones (the server may keep a generic plan, see
`CUSTOM`), and the plans the server really ran (``auto_explain``, on a second connection
that runs the same rounds): probe (the primary key per key), scan (the whole table), loop
(every key tested against each row of the table), insert (claims: the primary key checked
per row). Then the listings, counts, sessions and prune of a journal at that size (their
statements did not change). Load printed before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import secrets
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "journal"))  # the throwaway PostgreSQL cluster

import psycopg  # noqa: E402

from toolbridge.journal.postgres import PostgresJournal  # noqa: E402
from toolbridge.journal.postgres_sql import write_sql  # noqa: E402

CALLS = 200
FILL = (
    "INSERT INTO toolbridge_calls SELECT 'old-' || (i / 100), 'call-' || i, md5(i::text), "
    "'tool', '{\"n\": 1}'::jsonb, 'finished', 1, '{\"text\": \"ok\"}'::jsonb, NULL, NULL, "
    "1e9 + i, 1e9 + i, 1e9 + i, NULL FROM generate_series(%s, %s - 1) AS i"
)
_KEY = "c.session = u.s AND c.call_id = u.c AND c.args_hash = u.h"
BEFORE = {  # the statements as they were before this change
    "starts": "WITH started AS (UPDATE toolbridge_calls AS c SET state = 'running', "
    "started_at = %(now)s FROM unnest(%(ss)b::text[], %(sc)b::text[], %(sh)b::text[]) "
    f"AS u(s, c, h) WHERE {_KEY} AND c.owner = %(owner)s AND c.state = 'queued' "
    "RETURNING 1) SELECT 0, 0",
    "outcomes": "WITH finished AS (UPDATE toolbridge_calls AS c SET state = 'finished', "
    "outcome = u.o::jsonb, error_kind = u.e, finished_at = %(now)s, owner = NULL "
    "FROM unnest(%(fs)b::text[], %(fc)b::text[], %(fh)b::text[], %(fo)b::text[], "
    f"%(fe)b::text[]) AS u(s, c, h, o, e) WHERE {_KEY} AND c.owner = %(owner)s RETURNING 1) "
    "SELECT 0, (SELECT count(*) FROM finished)",
}
AFTER = {
    "starts": write_sql(claims=False, starts=True, finishes=False),
    "outcomes": write_sql(claims=False, starts=False, finishes=True),
}
CLAIMS = write_sql(claims=True, starts=False, finishes=False)  # the same before and after
DURABILITY = {"process": "off", "power": "on"}
STEPS = ("claims", "starts", "outcomes")
CUSTOM = 10
"""The batches of a new connection whose statements the server plans for their values:
psycopg prepares a text the sixth time it runs it, and the server plans a prepared
statement five more times for its values before it may keep a generic plan."""
AUTO_EXPLAIN = (
    "-c session_preload_libraries=auto_explain -c auto_explain.log_min_duration=0 "
    "-c auto_explain.log_level=notice"
)


def shape(plan: str) -> str:
    """How the server read the table: probe (the primary key per key), scan, loop (every
    key tested against each row), or insert (a claim's rows, the primary key checked)."""
    if re.search(r"Join Filter: \(\((c\.session = u\.s|u\.s = c\.session)", plan):
        return "loop"
    if "Seq Scan on toolbridge_calls" in plan:
        return "scan"
    if "Index Cond: ((session = u.s)" in plan:
        return "probe"
    if "Insert on toolbridge_calls" in plan and not re.search(r"Scan.* on toolbridge_calls", plan):
        return "insert"
    return "other"


class Runs:
    """What one variant's statements took at one size, batch by batch: wall ms, plans."""

    def __init__(self) -> None:
        self.wall: dict[str, list[float]] = {step: [] for step in STEPS}
        self.shapes: dict[str, list[str]] = {step: [] for step in STEPS}

    def cells(self, step: str) -> str:
        """Median ms of the first `CUSTOM` batches, then of the later ones; their plans."""
        wall, shapes = self.wall[step], self.shapes[step]
        ms = " / ".join(f"{statistics.median(part):.2f}" for part in _split(wall) if part)
        seen = " / ".join(
            ", ".join(f"{name} {count}" for name, count in Counter(part).most_common())
            for part in _split(shapes)
            if part
        )
        return f"{ms} | {seen}"


def _split(values: list[Any]) -> tuple[list[Any], list[Any]]:
    return values[:CUSTOM], values[CUSTOM:]


def batch(
    conn: psycopg.Connection[Any], texts: dict[str, str], runs: Runs, plans: list[str] | None
) -> None:
    """The claims, starts and outcomes of 200 new calls, each timed, or, when `plans` is
    given (the connection loads ``auto_explain``, which sends it the plan of each statement
    it runs), each's plan noted; then their rows go."""
    owner = secrets.randbits(62)
    session = f"b-{secrets.token_hex(6)}"
    keys = {"s": [session] * CALLS, "c": [f"c{i}" for i in range(CALLS)],
            "h": [secrets.token_hex(16) for _ in range(CALLS)]}  # fmt: skip
    steps = (
        ("claims", CLAIMS, {**keys, "now": time.time(), "owner": owner, "t": ["t"] * CALLS,
                            "a": ['{"n": 1}'] * CALLS, "p": [None] * CALLS,
                            "q": ["queued"] * CALLS}),
        ("starts", texts["starts"], {"now": time.time(), "owner": owner, "ss": keys["s"],
                                     "sc": keys["c"], "sh": keys["h"]}),
        ("outcomes", texts["outcomes"], {"now": time.time(), "owner": owner, "fs": keys["s"],
                                         "fc": keys["c"], "fh": keys["h"],
                                         "fo": ['{"text": "ok"}'] * CALLS,
                                         "fe": [None] * CALLS}),
    )  # fmt: skip
    for name, sql, params in steps:
        start = time.perf_counter()
        row = conn.execute(sql, params).fetchone()
        elapsed = (time.perf_counter() - start) * 1000
        assert row is not None and (name == "starts" or CALLS in row), (name, row)
        if plans is None:
            runs.wall[name].append(elapsed)
        else:
            runs.shapes[name].append(shape(plans[-1]))
            plans.clear()
    conn.execute("DELETE FROM toolbridge_calls WHERE session = %s", (session,))


async def listings(url: str, rounds: int) -> dict[str, float]:
    """Median ms of a journal's listing, counts, sessions and a prune that finds nothing."""
    journal = await PostgresJournal.connect(url)
    times: dict[str, list[float]] = {"entries": [], "counts": [], "sessions": [], "prune": []}
    try:
        for _ in range(rounds):
            for name, op in (
                ("entries", lambda: journal.entries(limit=100)),
                ("counts", journal.counts),
                ("sessions", journal.sessions),
                ("prune", lambda: journal.prune(older_than=time.time() - 999_999_000.0)),
            ):
                start = time.perf_counter()
                await op()
                times[name].append((time.perf_counter() - start) * 1000)
    finally:
        await journal.close()
    return {name: statistics.median(values) for name, values in times.items()}


def run(base: str, rounds: int, sizes: list[int]) -> None:
    url = f"{base} dbname=postgres"

    async def create() -> None:
        await (await PostgresJournal.connect(url)).close()

    asyncio.run(create())
    fill = psycopg.connect(url, autocommit=True)
    # Statistics as autovacuum leaves them, then not changed while a pass runs (its
    # batches are newer than them, as a journal's are): each pass starts with an ANALYZE.
    fill.execute("ALTER TABLE toolbridge_calls SET (autovacuum_enabled = false)")
    have = 0
    print(f"load before: {os.getloadavg()}; {rounds} rounds, 200 calls a batch")
    print(f"Each cell: median ms of the statement's round trip in the first {CUSTOM} batches of")
    print("a new connection / in the later ones; then the plans the server ran for them.")
    print("| rows | durability | statement | before | plans before | after | plans after |")
    print("|---|---|---|---|---|---|---|")
    listed: dict[int, dict[str, float]] = {}
    for size in sizes:
        fill.execute(FILL, (have, size))
        have = size
        for durability, setting in DURABILITY.items():
            runs = {"before": Runs(), "after": Runs()}
            # Each variant on connections of its own, new (as a journal just opened): one
            # timed, one that runs the same rounds with auto_explain loaded, for the plans
            # of the statements it really runs (planned for their values, then perhaps a
            # generic plan, see `CUSTOM`).
            for seen in (None, []):
                fill.execute("VACUUM ANALYZE toolbridge_calls")  # each pass from the same state
                options = "" if seen is None else f" options='{AUTO_EXPLAIN}'"
                conns = {v: psycopg.connect(url + options, autocommit=True) for v in runs}
                for conn in conns.values():
                    conn.execute(f"SET synchronous_commit = {setting}")
                    if seen is not None:
                        conn.add_notice_handler(
                            lambda notice, seen=seen: seen.append(notice.message_primary or "")
                        )
                for round_no in range(rounds):
                    order = (("before", BEFORE), ("after", AFTER))
                    for variant, texts in order if round_no % 2 else order[::-1]:
                        batch(conns[variant], texts, runs[variant], seen)
                for conn in conns.values():
                    conn.close()
            for step in STEPS:
                print(f"| {size:,} | {durability} | {step} | {runs['before'].cells(step)} "
                      f"| {runs['after'].cells(step)} |", flush=True)  # fmt: skip
        listed[size] = asyncio.run(listings(url, rounds))
    print(f"load after: {os.getloadavg()}")
    print("\n| rows | entries (100) | counts | sessions | prune (finds nothing) |")
    print("|---|---|---|---|---|")
    for size, medians in listed.items():
        print(f"| {size:,} | " + " | ".join(f"{value:.2f}" for value in medians.values()) + " |")
    fill.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--sizes", default="0,2000,12000,35000,100000")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    from conftest import throwaway_cluster

    with throwaway_cluster() as base:
        run(base, args.rounds, sizes)


if __name__ == "__main__":
    main()
