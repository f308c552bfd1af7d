"""Exporting one session of a SQLite journal, a page at a time: time against the session's size.

    python bench/journal_export_bench.py [--rounds 3] [--sizes 1000,10000,50000]

For each size N, a journal file holding a session of N calls among four other sessions of N
calls each, interleaved in time (five calls share each time, as a batch's do), written
straight into the journal's table. The session is read as `journal export` reads it
(`CallJournal.iter_entries`, pages of 1,000, each entry made JSON as the command prints
it, to no output) and as `journal show` reads it (pages of 100, entries only), from a
journal opened to write (with the session-listing index, `rows.LISTING_INDEX`) and from
the same file's copy with the index dropped (as a journal no process of this version has
opened to write is read). Rounds interleaved; reported: the median ms per read, µs per
call, and each time as a multiple of the 1,000-call one in the same run (linear: 10x and
50x). Load printed before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from toolbridge.cli.journal import _as_json
from toolbridge.core.jsontext import json_default
from toolbridge.journal import SQLiteJournal

OTHERS = 4
INSERT = "INSERT INTO toolbridge_calls VALUES (" + ", ".join(["?"] * 14) + ")"


def make_journal(path: Path, calls: int) -> None:
    """A journal opened to write once (its tables and index), then `calls` calls of the
    session "export" and of each of `OTHERS` other sessions, interleaved in time."""
    asyncio.run(SQLiteJournal(path).close())
    conn = sqlite3.connect(path)
    sessions = ["export", *(f"other-{n}" for n in range(OTHERS))]

    def rows() -> Iterator[tuple[object, ...]]:
        for n in range(calls):
            for session in sessions:
                yield (session, f"call-{n}", f"{n:064x}", "read_file",
                       '{"path": "notes/today.md"}', "finished", 1,
                       '{"content": "a line of notes", "is_error": false}', None, None,
                       1e9 + n, 1e9 + n, 1e9 + n + 0.01, None)  # fmt: skip

    with conn:
        conn.executemany(INSERT, rows())
    conn.close()


def without_index(path: Path, copy: Path) -> None:
    shutil.copyfile(path, copy)
    conn = sqlite3.connect(copy)
    conn.execute("DROP INDEX toolbridge_calls_by_session")
    conn.commit()
    conn.close()


async def export_ms(path: Path, calls: int) -> float:
    """`journal export --session export`'s reading and JSON, printed nowhere."""
    async with SQLiteJournal(path, create=False) as journal:
        start = time.perf_counter()
        read = 0
        async for entry in journal.iter_entries(session="export"):
            json.dumps(_as_json(entry), default=json_default, allow_nan=False)
            read += 1
        elapsed = (time.perf_counter() - start) * 1000
    assert read == calls, read
    return elapsed


async def show_ms(path: Path, calls: int) -> float:
    """`journal show export`'s reading: pages of 100."""
    async with SQLiteJournal(path, create=False) as journal:
        start = time.perf_counter()
        read = sum([1 async for _ in journal.iter_entries(session="export", page=100)])
        elapsed = (time.perf_counter() - start) * 1000
    assert read == calls, read
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sizes", default="1000,10000,50000")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        files: dict[tuple[int, str], Path] = {}
        for size in sizes:
            indexed = Path(tmp) / f"j{size}.sqlite3"
            make_journal(indexed, size)
            files[size, "with the index"] = indexed
            files[size, "without"] = Path(tmp) / f"n{size}.sqlite3"
            without_index(indexed, files[size, "without"])
        times: dict[tuple[str, int, str], list[float]] = {}
        for _ in range(args.rounds):
            for (size, kind), path in files.items():
                for read, measure in (("export", export_ms), ("show", show_ms)):
                    elapsed = asyncio.run(measure(path, size))
                    times.setdefault((read, size, kind), []).append(elapsed)
    load_after = os.getloadavg()
    median = statistics.median
    print(f"one session of N calls among {OTHERS} other sessions of N, median of {args.rounds}")
    print(f"load average (1 min): before {load_before[0]:.1f}, after {load_after[0]:.1f} "
          f"on {os.cpu_count()} CPUs")  # fmt: skip
    print("| read | index | calls | ms | µs per call | x the smallest size |")
    print("|---|---|---|---|---|---|")
    for (read, size, kind), values in sorted(
        times.items(), key=lambda item: (item[0][0], item[0][2], item[0][1])
    ):
        base = median(times[read, sizes[0], kind])
        ms = median(values)
        print(f"| {read} | {kind} | {size:,} | {ms:.1f} | {ms * 1000 / size:.1f} | "
              f"{ms / base:.1f}x |")  # fmt: skip


if __name__ == "__main__":
    main()
