"""W5 batches in one process, for callgrind to count the journal's instructions per call.

    for journal in none sqlite sqlite-no-index; do for batches in 2 12; do
      PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=cg.$journal.$batches \\
        python bench/journal_instructions.py --journal $journal --batches $batches
    done; done
    grep -h ^totals: cg.*    # or: callgrind_annotate cg.sqlite.12 | head

A run's instructions with 12 batches minus those with 2, over 10 x 200 calls, is the cost
per call of a batch (start-up and warm-up cancel out); the journal's work is that of
``sqlite`` minus that of ``none`` (the executor alone). ``sqlite-no-index`` is the same
journal with its session-listing index (`rows.LISTING_INDEX`) dropped once opened: the
write path as it was before the index. No timer is read (callgrind slows the process
some fifty times; the tools' 5 ms sleeps only wait). ``PYTHONHASHSEED=0``: a string's
hash moves a set's layout, and with it a run's count by about 2,000 a call.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

from journal_bench import batch_ms, without_listing_index

from toolbridge.journal import CallJournal, open_journal


async def run(journal_kind: str, batches: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp)
        journal: CallJournal | None = None
        if journal_kind != "none":
            journal = await open_journal(str(workspace / "j.sqlite3"))
            if journal_kind == "sqlite-no-index":
                journal = await without_listing_index(journal)
        for round_no in range(batches):
            await batch_ms(workspace, journal, round_no)
        if journal is not None:
            await journal.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--journal", choices=("none", "sqlite", "sqlite-no-index"), required=True)
    parser.add_argument("--batches", type=int, default=12)
    args = parser.parse_args()
    asyncio.run(run(args.journal, args.batches))


if __name__ == "__main__":
    main()
