"""Journal overhead on the W5 batch: 200 calls of a 5 ms tool, with and without a journal.

    python bench/journal_bench.py [--rounds 15] [--postgres CONNINFO]

Side by side in one run, rounds interleaved: the executor alone, with a SQLite journal
(durability "process" and "power"), and with a PostgreSQL journal (a throwaway cluster
started here unless --postgres names one). Each round uses new call ids, so every call
is claimed and finished for real. Reported: median ms per batch and the overhead per
call (SQLite) and per batch (PostgreSQL) above the executor alone, and, for scale, what
PostgreSQL itself takes to write a batch's rows: one INSERT of 200 rows and one UPDATE of
them, in a copy of the journal's table, sent by psycopg with no journal around them (the
floor any layout with one row per call pays), and what preparing the stored data of 200
calls costs with no database at all (the arguments' digest, arguments and outcome as JSON:
the floor of any journal in this process).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
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
from toolbridge.approval import arguments_digest  # noqa: E402
from toolbridge.journal import CallJournal, open_journal  # noqa: E402
from toolbridge.journal.base import to_json  # noqa: E402
from toolbridge.journal.recorder import result_to_json  # noqa: E402

CALLS = 200
SESSION = f"w5-{uuid.uuid4().hex}"
FLOOR = "PostgreSQL's own INSERT + UPDATE of 200 rows"
ENCODING = "the data a journal stores, prepared for 200 calls"


@tool(read_only=True)
async def wait_5ms(n: int) -> int:
    """Sleep 5 ms, then answer."""
    await asyncio.sleep(0.005)
    return n


async def batch_ms(workspace: Path, journal: CallJournal | None, round_no: int) -> float:
    # A session of this run's own: against a database kept from an earlier run (--postgres),
    # the same call ids would replay instead of run.
    registry = ToolRegistry([wait_5ms], context=ToolContext(workspace=workspace, session=SESSION))
    policy = ExecutionPolicy(persist_results=False, loop_guard=False, tracing=False)
    executor = ToolExecutor(registry, policy, journal=journal)
    calls = [ToolCallRequest(f"r{round_no}-{i}", "wait_5ms", {"n": i}) for i in range(CALLS)]
    start = time.perf_counter()
    outcomes = await executor.run(calls)
    elapsed = (time.perf_counter() - start) * 1000
    assert all(outcome.ok for outcome in outcomes)
    return elapsed


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
    """PostgreSQL's own time for a batch's rows: insert 200, then mark them finished."""
    ids = [f"f{round_no}-{i}" for i in range(CALLS)]
    start = time.perf_counter()
    await conn.execute(
        "INSERT INTO floor_calls (session, call_id, args_hash, tool, arguments, state, attempt, "
        "created_at, started_at, owner) SELECT 'w5', c, 'h', 'wait_5ms', a::jsonb, 'running', "
        "1, 0, 0, 1 FROM unnest(%b::text[], %b::text[]) AS u(c, a)",
        (ids, [f'{{"n":{i}}}' for i in range(CALLS)]),
    )
    await conn.execute(
        "UPDATE floor_calls AS c SET state = 'finished', outcome = u.o::jsonb, finished_at = 0, "
        "owner = NULL FROM unnest(%b::text[], %b::text[]) AS u(c, o) "
        "WHERE c.session = 'w5' AND c.call_id = u.c AND c.args_hash = 'h'",
        (ids, ['{"content":"1","is_error":false}'] * CALLS),
    )
    return (time.perf_counter() - start) * 1000


async def measure(rounds: int, postgres: str) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp)
        journals: dict[str, CallJournal | None] = {
            "executor alone": None,
            "SQLite (process)": await open_journal(str(workspace / "p.sqlite3")),
            "SQLite (power)": await open_journal(str(workspace / "f.sqlite3"), durability="power"),
            "PostgreSQL": await open_journal(postgres),
        }
        import psycopg

        floor = await psycopg.AsyncConnection.connect(postgres, autocommit=True)
        await floor.execute("SET synchronous_commit = off")  # as the journal's "process" level
        await floor.execute("CREATE TABLE floor_calls (LIKE toolbridge_calls INCLUDING ALL)")
        times: dict[str, list[float]] = {name: [] for name in journals}
        times[FLOOR] = []
        times[ENCODING] = []
        for round_no in range(rounds + 1):
            for name, journal in journals.items():
                elapsed = await batch_ms(workspace, journal, round_no)
                if round_no:  # the first round warms up
                    times[name].append(elapsed)
            elapsed = await floor_ms(floor, round_no)
            if round_no:
                times[FLOOR].append(elapsed)
                times[ENCODING].append(encoding_ms(round_no))
        await floor.execute("DROP TABLE floor_calls")
        await floor.close()
        for journal in journals.values():
            if journal is not None:
                await journal.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--postgres", help="a conninfo or URL; default: a throwaway cluster")
    args = parser.parse_args()
    with ExitStack() as stack:
        postgres = args.postgres
        if postgres is None:
            from conftest import throwaway_cluster

            postgres = stack.enter_context(throwaway_cluster()) + " dbname=postgres"
        times = asyncio.run(measure(args.rounds, postgres))
    base = statistics.median(times["executor alone"])
    print(f"W5: {CALLS} calls of a 5 ms tool, median of {args.rounds} rounds (interleaved)")
    print("| runner | ms per batch | above the executor alone |")
    print("|---|---|---|")
    for name, values in times.items():
        median = statistics.median(values)
        if name in (FLOOR, ENCODING):
            print(f"| {name} (no executor) | {median:.2f} | - |")
            continue
        extra = median - base
        per = (
            f"{extra * 1000 / CALLS:+.1f} µs per call"
            if "SQLite" in name
            else f"{extra:+.2f} ms per batch"
        )
        print(f"| {name} | {median:.2f} | {'-' if name == 'executor alone' else per} |")


if __name__ == "__main__":
    main()
