"""``toolbridge journal``: read the call journal for audits (list, show, export) and prune it."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from toolbridge.cli.app import CliError, ExitCode, WorkspaceOption, app, out, reporting
from toolbridge.cli.display import echo_json, plain, table
from toolbridge.core.jsontext import json_default
from toolbridge.journal import (
    CallJournal,
    JournalEntry,
    JournalError,
    NoJournal,
    SQLiteJournal,
    open_journal,
)
from toolbridge.journal.rows import named_numbers

if TYPE_CHECKING:
    from rich.text import Text

journal_app = typer.Typer(
    name="journal",
    help="The call journal: what ran, when, and what came of it.",
    no_args_is_help=True,
)
app.add_typer(journal_app)

JournalOption = Annotated[
    str | None,
    typer.Option(
        "--journal",
        "-j",
        envvar="TOOLBRIDGE_JOURNAL",
        help="A SQLite file, a sqlite:///absolute/path URL or a postgresql:// URL "
        "(default: the workspace's .toolbridge/journal.sqlite3).",
    ),
]

T = TypeVar("T")


def _with_journal(
    workspace: Path | None, target: str | None, use: Callable[[CallJournal], Awaitable[T]]
) -> T:
    folder = workspace or Path.cwd()
    if target is not None and not target.strip():
        raise CliError(
            "--journal is empty: give a journal's file, or a postgresql:// URL", ExitCode.USAGE
        )

    async def run() -> T:
        # Only an existing journal is opened: a mistyped path is an error, not a new journal.
        opened = (
            SQLiteJournal.in_workspace(folder, create=False)
            if target is None
            else await open_journal(target, create=False)
        )
        async with opened as journal:
            return await use(journal)

    try:
        return asyncio.run(run())
    except NoJournal as exc:  # a missing file, as for any other command
        raise CliError(str(exc), ExitCode.USAGE) from None
    except JournalError as exc:
        raise CliError(str(exc), ExitCode.CONFIG) from None


@journal_app.command("list")
def list_command(
    workspace: WorkspaceOption = None,
    journal: JournalOption = None,
) -> None:
    """List the sessions in the journal, most recent first."""

    async def use(store: CallJournal) -> list[tuple[str, float, int]]:
        sessions, counts = await store.sessions(), await store.counts()
        return [(name, when, counts.get(name, 0)) for name, when in sessions]

    with reporting(verbose=False):
        sessions = _with_journal(workspace, journal, use)
        grid = table("session", "calls", "last change")
        for name, when, count in sessions:
            grid.add_row(plain(name), str(count), _local_time(when))
        out.print(grid)


def _local_time(when: float) -> str:
    """A stored time as local date and time; one no calendar holds (a file another
    program wrote) as its number."""
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(when))
    except (OverflowError, OSError, ValueError):
        return f"{when!r} (not a date)"


@journal_app.command("show")
def show_command(
    session: Annotated[str, typer.Argument(help="The session to show.")],
    workspace: WorkspaceOption = None,
    journal: JournalOption = None,
) -> None:
    """Show the calls of one session: tool, state, attempts, error kind, duration, and who
    approved the calls that needed it."""

    async def use(store: CallJournal) -> list[tuple[Text | str, ...]]:
        # A page of entries in memory at a time: of each call only what a row shows is
        # kept, not its arguments and outcome (a long session's outcomes may be large).
        return [_shown(entry) async for entry in store.iter_entries(session=session, page=100)]

    with reporting(verbose=False):
        _check_session(session)
        rows = _with_journal(workspace, journal, use)
        if not rows:
            raise CliError(f"no calls in session {session!r}", ExitCode.USAGE)
        grid = table("call id", "tool", "state", "attempt", "error", "seconds", "approved by")
        for row in rows:
            grid.add_row(*row)
        out.print(grid)


def _shown(entry: JournalEntry) -> tuple[Text | str, ...]:
    """What `journal show` shows of a call: its row's cells."""
    took = (
        f"{entry.finished_at - entry.started_at:.3f}"
        if entry.finished_at is not None and entry.started_at is not None
        else ""
    )
    return (
        plain(entry.key.call_id), plain(entry.tool), plain(entry.state), str(entry.attempt),
        plain(entry.error_kind or ""), took, plain(approved_by(entry)),
    )  # fmt: skip


def _check_session(session: str | None) -> None:
    """A session name given as bytes that are not UTF-8 (Python's lone surrogates) is in
    no journal, which stores text: say so, rather than blame the journal."""
    if session is not None and not session.isascii():
        try:
            session.encode("utf-8")
        except UnicodeEncodeError:
            raise CliError(
                f"the session name {session!r} is not UTF-8 text, and a journal holds only "
                "text names; give the name as `toolbridge journal list` shows it"
            ) from None


@journal_app.command("export")
def export_command(
    workspace: WorkspaceOption = None,
    journal: JournalOption = None,
    session: Annotated[str | None, typer.Option(help="Only this session.")] = None,
) -> None:
    """Print every stored call as one JSON object per line (JSON Lines), oldest first."""

    async def use(store: CallJournal) -> None:
        async for entry in store.iter_entries(session=session):  # a page in memory at a time
            row = _as_json(entry)
            try:
                echo_json(row, default=json_default, allow_nan=False)
            except ValueError:  # a bare NaN, as an older toolbridge stored a tool's
                echo_json(named_numbers(row), default=json_default)  # by name, as stored now

    with reporting(verbose=False):
        _check_session(session)
        _with_journal(workspace, journal, use)


@journal_app.command("prune")
def prune_command(
    workspace: WorkspaceOption = None,
    journal: JournalOption = None,
    older_than_days: Annotated[
        float | None,
        typer.Option("--older-than-days", min=0, help="Delete finished calls older."),
    ] = None,
    keep_sessions: Annotated[
        int | None,
        typer.Option("--keep-sessions", min=0, help="Keep only the newest N sessions."),
    ] = None,
) -> None:
    """Delete old finished calls; running ones always stay."""
    older = older_than_days * 86_400 if older_than_days is not None else None
    with reporting(verbose=False):
        if older_than_days is None and keep_sessions is None:
            raise CliError("say what to prune: --older-than-days and/or --keep-sessions")
        deleted = _with_journal(
            workspace,
            journal,
            lambda store: store.prune(older_than=older, keep_sessions=keep_sessions),
        )
    out.print(f"deleted {deleted} finished call(s)", markup=False, highlight=False)


def approved_by(entry: JournalEntry) -> str:
    """Who approved a call, as stored: empty when it needed no approval, ``unknown`` for a
    record written before toolbridge stored who (``by``)."""
    approval = entry.approval
    if not approval:
        return ""
    by = str(approval.get("by") or "unknown")
    return f"{by} (retry)" if approval.get("retry") else by


def _as_json(entry: JournalEntry) -> dict[str, Any]:
    """An entry as export writes it, its key's parts first. Its values as read (an entry is
    a copy of its row): not copied again, as `dataclasses.asdict` did, deeply, for three
    quarters of an export's time."""
    data = entry.key._asdict()
    for field in _ENTRY_FIELDS:
        data[field] = getattr(entry, field)
    return data


_ENTRY_FIELDS = [field.name for field in dataclasses.fields(JournalEntry) if field.name != "key"]
