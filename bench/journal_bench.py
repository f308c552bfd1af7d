"""Journal overhead on the W5 batch: 200 calls of a 5 ms tool, with and without a journal.

    python bench/journal_bench.py [--rounds 15] [--postgres CONNINFO] [--without-listing-index]

Side by side in one run, rounds interleaved: the executor alone, with a SQLite journal
(durability "process" and "power"), and with a PostgreSQL journal (a throwaway cluster
started here unless --postgres names one), and the same batch with ``max_concurrency=6``
(calls wait for a slot: claimed queued, marked running when they start) with and without a
SQLite or PostgreSQL journal. Each round uses new call ids, so every call is claimed and
finished for real. Reported: median ms per batch (wall clock) and CPU ms per batch of this process
(the writer thread and SQLite included; PostgreSQL's server is not), the overhead per
call (SQLite) and per batch (PostgreSQL) above the executor alone, the load average
before and after, and three floors measured in the same run with no executor. PostgreSQL's
own time for a batch's rows: the journal's own statements (`postgres_sql.write_sql`: the
claims of 200 new calls, then their outcomes, each its own round trip as in a batch,
where the tools run between them), with the rows the journal sends (as it sends them:
prebuilt binary ``text[]`` arrays, `postgres_sql.text_array`), from a bare psycopg
connection into the journal's own table (the same rows in the same table: the statements'
time depends on its size); PostgreSQL's overhead is given as a
multiple of it. SQLite's own time likewise: the journal's statements for the same rows, a
transaction per 64 calls, from a bare connection on a journal file of its own
(`sqlite_floor_ms`), printed beside SQLite's overhead. And what preparing the stored data
of 200 calls costs with no database at
all (the arguments' digest, arguments and outcome as JSON: the floor of any journal in
this process).

``--without-listing-index`` adds a SQLite and a PostgreSQL runner whose journal has its
session-listing index (`rows.LISTING_INDEX`) dropped once opened: the write path as it was
before the index, in the same run, rounds interleaved (PostgreSQL's in a database of its
own, ``toolbridge_no_listing_index``, made on the same server).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "journal"))  # the throwaway PostgreSQL cluster

from toolbridge import (  # noqa: E402
    ExecutionPolicy,
    ToolCallRequest,
    ToolContext,
    ToolExecutor,
    ToolRegistry,
    ToolResult,
    tool,
)
from toolbridge.execution.approval import arguments_digest  # noqa: E402
from toolbridge.journal import CallJournal, open_journal  # noqa: E402
from toolbridge.journal.postgres_connection import send_text_arrays  # noqa: E402
from toolbridge.journal.postgres_sql import text_array, write_sql  # noqa: E402
from toolbridge.journal.recorder import result_to_json  # noqa: E402
from toolbridge.journal.rows import to_json  # noqa: E402
from toolbridge.journal.sqlite_file import connect  # noqa: E402
from toolbridge.journal.sqlite_writer import (  # noqa: E402
    _FINISH,
    _INSERT,
    AT_ONCE,
    NULL,
    _write_rows,
)

CALLS = 200
SESSION = f"w5-{uuid.uuid4().hex}"
# The floor's rows go into the journal's own table (its time depends on the table's
# size), under a session and an owner number of their own: no journal ever claims them.
FLOOR_SESSION = f"floor-{SESSION}"
FLOOR_OWNER = -1
FLOOR = "PostgreSQL's own time: the claim and finish statements of 200 calls, bare psycopg"
SQLITE_FLOOR = "SQLite's own time: the claim and finish statements of 200 calls, bare sqlite3"
ENCODING = "the data a journal stores, prepared for 200 calls"


@tool(read_only=True)
async def wait_5ms(n: int) -> int:
    """Sleep 5 ms, then answer."""
    await asyncio.sleep(0.005)
    return n


async def batch_ms(
    workspace: Path, journal: CallJournal | None, round_no: int, limit: int | None = None
) -> tuple[float, float]:
    """(wall ms, CPU ms of this process) for one batch."""
    # A session of this run's own: against a database kept from an earlier run (--postgres),
    # the same call ids would replay instead of run.
    registry = ToolRegistry([wait_5ms], context=ToolContext(workspace=workspace, session=SESSION))
    policy = ExecutionPolicy(
        persist_results=False, loop_guard=False, tracing=False, max_concurrency=limit
    )
    executor = ToolExecutor(registry, policy, journal=journal)
    prefix = f"r{round_no}-{limit}"
    calls = [ToolCallRequest(f"{prefix}-{i}", "wait_5ms", {"n": i}) for i in range(CALLS)]
    gc.collect()  # see `measure`
    cpu, start = time.process_time(), time.perf_counter()
    outcomes = await executor.run(calls)
    elapsed = (time.perf_counter() - start) * 1000
    assert all(outcome.ok for outcome in outcomes)
    return elapsed, (time.process_time() - cpu) * 1000


def encoding_ms(round_no: int) -> float:
    """What any journal must compute per call before storing it, with no database: the
    arguments' digest, the arguments and the outcome as JSON."""
    results = [ToolResult(str(i)) for i in range(CALLS)]
    start = time.perf_counter()
    for i, result in enumerate(results):
        arguments = {"n": i}
        arguments_digest("wait_5ms", arguments)
        to_json(arguments)
        to_json(result_to_json(result))
    return (time.perf_counter() - start) * 1000


async def floor_ms(conn: Any, round_no: int) -> float:
    """PostgreSQL's own time for a batch's rows: the journal's claim statement for 200 new
    calls, then its finish statement for them, with the rows the journal sends (the same
    SQL text, the same columns and values, the same table), each its own round trip as in
    a batch (the tools run between them), sent by psycopg with no journal around them. The
    rows are made before the clock starts: making their data is a row of its own."""
    gc.collect()  # see `measure`
    keys = [(FLOOR_SESSION, f"f{round_no}-{i}", arguments_digest("wait_5ms", {"n": i}))
            for i in range(CALLS)]  # fmt: skip
    now = time.time()
    sessions, ids, digests = (text_array([key[i] for key in keys]) for i in range(3))
    arguments = text_array([to_json({"n": i}) for i in range(CALLS)])
    outcomes = text_array([to_json(result_to_json(ToolResult(str(i)))) for i in range(CALLS)])
    claimed = {"now": now, "owner": FLOOR_OWNER, "s": sessions, "c": ids, "h": digests,
               "t": text_array(["wait_5ms"] * CALLS), "a": arguments,
               "p": text_array([None] * CALLS), "q": text_array(["running"] * CALLS)}  # fmt: skip
    finished = {"now": now, "owner": FLOOR_OWNER, "fs": sessions, "fc": ids, "fh": digests,
                "fo": outcomes, "fe": text_array([None] * CALLS)}  # fmt: skip
    start = time.perf_counter()
    await conn.execute(write_sql(claims=True, starts=False, finishes=False), claimed)
    await conn.execute(write_sql(claims=False, starts=False, finishes=True), finished)
    return (time.perf_counter() - start) * 1000


def sqlite_floor_ms(conn: sqlite3.Connection, round_no: int) -> float:
    """SQLite's own time for a batch's rows: the journal's statements (`sqlite_writer`'s
    multi-row ``INSERT`` of new calls, then its ``UPDATE ... FROM`` of their outcomes),
    with the rows the journal writes, a transaction per 64 calls as the journal's on the
    loop, from a bare connection opened as the journal opens its own
    (`sqlite_file.connect`) on a journal file of its own, with no journal around them. The
    rows are made before the clock starts: making their data is a row of its own."""
    gc.collect()  # see `measure`
    keys = [(FLOOR_SESSION, f"f{round_no}-{i}", arguments_digest("wait_5ms", {"n": i}))
            for i in range(CALLS)]  # fmt: skip
    now = time.time()

    def parts(row: Callable[[int], tuple[Any, ...]]) -> list[list[tuple[Any, ...]]]:
        """`row` of each call, a transaction's rows (`AT_ONCE`) a list."""
        return [[row(i) for i in range(first, min(first + AT_ONCE, CALLS))]
                for first in range(0, CALLS, AT_ONCE)]  # fmt: skip

    claims = parts(lambda i: (*keys[i], "wait_5ms", to_json({"n": i}), "running", NULL, now,
                              now, FLOOR_OWNER))  # fmt: skip
    outcomes = parts(lambda i: (to_json(result_to_json(ToolResult(str(i)))), NULL, now, *keys[i]))
    start = time.perf_counter()
    for rows in claims:
        conn.execute("BEGIN IMMEDIATE")
        _write_rows(conn, _INSERT, rows)
        conn.execute("COMMIT")
    for rows in outcomes:
        conn.execute("BEGIN IMMEDIATE")
        _write_rows(conn, _FINISH, rows, update=True)
        conn.execute("COMMIT")
    return (time.perf_counter() - start) * 1000


LIMITED = "max_concurrency=6"
NO_INDEX = "no listing index"


async def without_listing_index(journal: CallJournal) -> CallJournal:
    """`journal` with its session-listing index dropped: each claim writes the table and
    its other indexes only, as before the index was made."""
    from toolbridge.journal.postgres import PostgresJournal
    from toolbridge.journal.sqlite import SQLiteJournal

    if isinstance(journal, SQLiteJournal):
        journal._conn.execute("DROP INDEX toolbridge_calls_by_session")
    else:
        assert isinstance(journal, PostgresJournal)
        await journal._conn.execute("DROP INDEX toolbridge_calls_by_session")
    return journal


async def other_database(postgres: str, name: str) -> str:
    """The conninfo of database `name` on the server of `postgres`, made if missing."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    async with await psycopg.AsyncConnection.connect(postgres, autocommit=True) as conn:
        cursor = await conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
        if await cursor.fetchone() is None:
            await conn.execute(f'CREATE DATABASE "{name}"')
    return make_conninfo(postgres, dbname=name)


async def measure(
    rounds: int, postgres: str, no_index: bool = False
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Wall and CPU ms per batch of each runner, rounds interleaved.

    Each batch starts with the garbage collected: a full collection costs this process
    30-40 ms (its heap holds every runner, psycopg and PostgreSQL's journal), and it fell
    on whichever batch was running when it came, a quarter of one runner's rounds in one
    run, none of another's. The collections of a batch's own garbage are still timed."""
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp)
        sqlite = await open_journal(str(workspace / "p.sqlite3"))
        shared = await open_journal(postgres)
        journals: dict[str, tuple[CallJournal | None, int | None]] = {
            "executor alone": (None, None),
            "SQLite (process)": (sqlite, None),
            "SQLite (power)": (
                await open_journal(str(workspace / "f.sqlite3"), durability="power"),
                None,
            ),
            "PostgreSQL": (shared, None),
            f"executor alone, {LIMITED}": (None, 6),
            f"SQLite (process), {LIMITED}": (sqlite, 6),
            f"PostgreSQL, {LIMITED}": (shared, 6),
        }
        if no_index:
            bare = await without_listing_index(await open_journal(str(workspace / "n.sqlite3")))
            other = await other_database(postgres, "toolbridge_no_listing_index")
            journals[f"SQLite (process), {NO_INDEX}"] = (bare, None)
            journals[f"PostgreSQL, {NO_INDEX}"] = (
                await without_listing_index(await open_journal(other)),
                None,
            )
        await (await open_journal(str(workspace / "floor.sqlite3"))).close()
        bare = connect(workspace / "floor.sqlite3", durability="process", create=False,
                       inline=False)  # fmt: skip
        import psycopg

        floor = await psycopg.AsyncConnection.connect(postgres, autocommit=True)
        send_text_arrays(floor)  # the arrays as the journal sends them (prebuilt binary)
        await floor.execute("SET synchronous_commit = off")  # as the journal's "process" level
        times: dict[str, list[float]] = {name: [] for name in journals}
        cpu: dict[str, list[float]] = {name: [] for name in journals}
        times[FLOOR] = []
        times[SQLITE_FLOOR] = []
        times[ENCODING] = []
        for round_no in range(rounds + 1):
            for name, (journal, limit) in journals.items():
                elapsed, used = await batch_ms(workspace, journal, round_no, limit)
                if round_no:  # the first round warms up
                    times[name].append(elapsed)
                    cpu[name].append(used)
            elapsed = await floor_ms(floor, round_no)
            bare_elapsed = sqlite_floor_ms(bare, round_no)
            if round_no:
                times[FLOOR].append(elapsed)
                times[SQLITE_FLOOR].append(bare_elapsed)
                times[ENCODING].append(encoding_ms(round_no))
        await floor.close()
        bare.close()
        for journal in {id(j): j for j, _ in journals.values() if j is not None}.values():
            await journal.close()
    return times, cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--postgres", help="a conninfo or URL; default: a throwaway cluster")
    parser.add_argument(
        "--without-listing-index",
        action="store_true",
        help="add SQLite and PostgreSQL runners whose journal has no session-listing index",
    )
    args = parser.parse_args()
    with ExitStack() as stack:
        postgres = args.postgres
        if postgres is None:
            from conftest import throwaway_cluster

            postgres = stack.enter_context(throwaway_cluster()) + " dbname=postgres"
        load_before = os.getloadavg()
        times, cpu = asyncio.run(measure(args.rounds, postgres, args.without_listing_index))
        load_after = os.getloadavg()
    median = statistics.median
    print(f"W5: {CALLS} calls of a 5 ms tool, median of {args.rounds} rounds (interleaved)")
    print(f"load average (1, 5, 15 min): before {_load(load_before)}, after {_load(load_after)}"
          f" on {os.cpu_count()} CPUs")  # fmt: skip
    print("| runner | ms per batch | above the executor alone | CPU ms per batch | CPU above |")
    print("|---|---|---|---|---|")
    for name, values in times.items():
        if name in (FLOOR, SQLITE_FLOOR, ENCODING):
            print(f"| {name} (no executor) | {median(values):.2f} | - | - | - |")
            continue
        base_name = f"executor alone, {LIMITED}" if LIMITED in name else "executor alone"
        extra = median(values) - median(times[base_name])
        extra_cpu = median(cpu[name]) - median(cpu[base_name])
        if "SQLite" in name:
            per = f"{extra * 1000 / CALLS:+.1f} µs per call"
            if name == "SQLite (process)":  # the floor's durability and shape
                per += f" (SQLite's own {median(times[SQLITE_FLOOR]) * 1000 / CALLS:.1f})"
            per_cpu = f"{extra_cpu * 1000 / CALLS:+.1f} µs per call"
        else:
            per = f"{extra:+.2f} ms per batch ({extra / median(times[FLOOR]):.2f}x the floor)"
            per_cpu = f"{extra_cpu:+.2f} ms per batch"
        if name == base_name:
            per = per_cpu = "-"
        print(f"| {name} | {median(values):.2f} | {per} | {median(cpu[name]):.2f} | {per_cpu} |")


def _load(load: tuple[float, float, float]) -> str:
    return ", ".join(f"{value:.1f}" for value in load)


if __name__ == "__main__":
    main()
