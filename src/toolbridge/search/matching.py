"""Matching: the lines of listed files that match a regular expression, on either engine.

Both engines search files in listing order, line by line (a CR before the newline is
not part of the line, a UTF-8 BOM is dropped), skip binary files (a NUL byte near the
start) and files over the size limit, search other bytes as UTF-8 with undecodable
bytes replaced, stop after `GrepRequest.max_matches` lines, and cut long lines around
the match. The Python engine sends file text to `toolbridge.search.grep_worker`, a process
killed at the deadline; the ripgrep engine runs ``rg --json`` over the listed files.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolbridge.core.errors import ToolExecutionError, WorkspaceViolation
from toolbridge.search import grep_worker
from toolbridge.search.ripgrep import deadline_at, run_ripgrep
from toolbridge.security import names
from toolbridge.security.workspace import Workspace
from toolbridge.tools._fs import looks_binary

__all__ = ["Found", "GrepRequest", "python_matches", "ripgrep_flags", "ripgrep_matches"]

logger = logging.getLogger(__name__)

_WORKER = Path(grep_worker.__file__)
_ARGUMENT_BYTES = 128 * 1024  # file names per rg run: far below the kernel's ARG_MAX
PARALLEL_RUNS = max(1, min(4, os.cpu_count() or 1))


@dataclass(frozen=True, slots=True)
class GrepRequest:
    """What to look for and the limits of one search."""

    pattern: str
    ignore_case: bool
    max_matches: int
    max_line_chars: int
    max_file_bytes: int


@dataclass(slots=True)
class Found:
    """Matching lines as (path shown to the model, line number, excerpt), in file order."""

    matches: list[tuple[str, int, str]] = field(default_factory=list)
    searched: int = 0  # files finished (all of them unless timed out)
    timed_out: bool = False


# --- Python ------------------------------------------------------------------------


async def python_matches(
    workspace: Workspace, files: list[str], request: GrepRequest, stop: float
) -> Found:
    """Search `files` with Python's `re` in a worker process killed at `stop`."""
    found = Found()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-I", "-S", str(_WORKER),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env={}, limit=1 << 20,
    )  # fmt: skip
    stdin, stdout, stderr = process.stdin, process.stdout, process.stderr
    if stdin is None or stdout is None or stderr is None:
        raise RuntimeError("the grep worker was started without pipes")
    header = {
        "pattern": request.pattern,
        "ignore_case": request.ignore_case,
        "max_matches": request.max_matches,
        "max_chars": request.max_line_chars,
    }

    finished = asyncio.Event()  # the worker stopped answering: at the cap, or it died

    async def feed() -> None:
        try:
            stdin.write(json.dumps(header).encode() + b"\n")
            for batch in _batches(files):
                if finished.is_set():  # do not read files nobody will search
                    break
                texts = await asyncio.to_thread(_read_batch, workspace, batch, request, stop)
                if finished.is_set():
                    break
                for shown, text in texts:
                    if stdin.is_closing():  # the worker exited: writing more only warns
                        return
                    stdin.write(json.dumps([shown, text]).encode() + b"\n")
                await stdin.drain()
            stdin.close()
        except (BrokenPipeError, ConnectionResetError):
            logger.debug("grep worker stopped reading (result cap reached)")

    async def collect() -> None:
        async for raw in stdout:
            item = json.loads(raw)
            if item[0] == "match":
                found.matches.append((item[1], item[2], item[3]))
            else:
                found.searched += 1
        finished.set()

    try:
        async with asyncio.timeout_at(deadline_at(stop)):
            await asyncio.gather(feed(), collect())
            await process.wait()
    except TimeoutError:
        found.timed_out = True
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    if not found.timed_out and process.returncode != 0:
        detail = (await stderr.read()).decode(errors="replace").strip().splitlines()
        raise ToolExecutionError(
            f"the search failed: {detail[-1] if detail else f'exit {process.returncode}'}",
            hint="Try a simpler pattern.",
        )
    if len(found.matches) >= request.max_matches:
        found.searched = len(files)  # stopped at the cap, not for lack of time
    return found


def _batches(files: list[str]) -> Iterator[list[str]]:
    """Files in groups of 256, each read in one worker thread."""
    batch: list[str] = []
    for path in files:
        batch.append(path)
        if len(batch) >= 256:
            yield batch
            batch = []
    if batch:
        yield batch


def _read_batch(
    workspace: Workspace, batch: list[str], request: GrepRequest, stop: float
) -> list[tuple[str, str]]:
    """The text of each readable, non-binary file of `batch` that is not too large."""
    texts: list[tuple[str, str]] = []
    reads = workspace.read_files((workspace.root / name for name in batch), request.max_file_bytes)
    try:
        for real, read in reads:
            if time.monotonic() >= stop:  # the caller is being timed out: stop reading
                break
            shown = workspace.relative(real)
            data = b""  # unreadable, too large or binary: searched as empty, as rg skips it
            if not isinstance(read, bytes):
                logger.debug("grep skips %s: %s", shown, read)
            elif len(read) <= request.max_file_bytes and not looks_binary(read):
                data = read
            texts.append((shown, data.decode("utf-8-sig", errors="replace")))
    finally:
        reads.close()
    return texts


# --- ripgrep -----------------------------------------------------------------------


def ripgrep_flags(request: GrepRequest) -> list[str]:
    """The flags that give ripgrep the matching rules of the Python engine."""
    flags = ["--crlf"]  # '$' matches before a CR LF, as the worker strips the CR
    if request.ignore_case:
        flags.append("--ignore-case")
    return flags


async def ripgrep_matches(
    rg: str, workspace: Workspace, files: list[str], request: GrepRequest, stop: float
) -> Found:
    """Search `files` with ``rg --json``, results in listing order, killed at `stop`.

    The names go to ripgrep in chunks, up to `PARALLEL_RUNS` of them at once (each run
    single-threaded, so its output keeps the order of its names); the chunks' matches
    are joined in order, and the runs still going stop once `max_matches` is reached.
    The files are given by name, so ripgrep follows a symlink that replaced one since
    the listing; every file that matched is checked again through the guard, and
    dropped if its path now leads through a symlink.
    """
    found = Found()
    arguments = [
        "--json", "--threads=1", "--no-ignore", "--hidden",
        f"--max-filesize={request.max_file_bytes}", f"--max-count={request.max_matches}",
        *ripgrep_flags(request), "--regexp", request.pattern, "--",
    ]  # fmt: skip
    slots = asyncio.Semaphore(PARALLEL_RUNS)

    async def search(chunk: list[str]) -> list[tuple[str, int, str]]:
        async with slots:
            part = Found()
            async with run_ripgrep(rg, [*arguments, *chunk], workspace.root, stop) as output:
                await _collect_json(output, workspace, request, part)
            return part.matches

    chunks = list(_name_chunks(files))
    runs = [asyncio.ensure_future(search(chunk)) for chunk in chunks]
    try:
        async with asyncio.timeout_at(deadline_at(stop)):
            for chunk, run in zip(chunks, runs, strict=True):
                matches = await run
                found.matches.extend(matches[: request.max_matches - len(found.matches)])
                found.searched += len(chunk)
                if len(found.matches) >= request.max_matches:
                    found.searched = len(files)
                    break
    except TimeoutError:
        found.timed_out = True
    finally:
        for run in runs:
            run.cancel()
        await asyncio.gather(*runs, return_exceptions=True)  # each kills its rg on the way
    return found


def _name_chunks(files: list[str]) -> Iterator[list[str]]:
    chunk: list[str] = []
    size = 0
    for name in files:
        chunk.append(name)
        size += len(name) + 1
        if size >= _ARGUMENT_BYTES:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


async def _collect_json(
    output: asyncio.StreamReader, workspace: Workspace, request: GrepRequest, found: Found
) -> None:
    """Read one rg run's JSON messages; keep a file's matches when it ends as text."""
    pending: list[tuple[str, int, str]] = []
    async for raw in output:
        message = json.loads(raw)
        kind, data = message["type"], message["data"]
        if kind == "match":
            text = _decode(data["lines"]).rstrip("\n").removesuffix("\r")
            start = data["submatches"][0]["start"] if data["submatches"] else 0
            line_bytes = _raw(data["lines"])
            column = len(line_bytes[:start].decode("utf-8", errors="replace"))
            excerpt = grep_worker.excerpt(text, column, request.max_line_chars)
            pending.append((_name(data["path"]), data["line_number"], excerpt))
        elif kind == "end":
            if data.get("binary_offset") is None and pending and _still_inside(workspace, pending):
                room = request.max_matches - len(found.matches)
                found.matches.extend(pending[:room])
                if len(found.matches) >= request.max_matches:
                    return
            pending = []


def _raw(value: dict[str, Any]) -> bytes:
    if "text" in value:
        text: str = value["text"]
        return text.encode("utf-8", errors="surrogateescape")
    return base64.b64decode(value["bytes"])


def _decode(value: dict[str, Any]) -> str:
    if "text" in value:
        text: str = value["text"]
        return text
    return base64.b64decode(value["bytes"]).decode("utf-8", errors="replace")


def _name(value: dict[str, Any]) -> str:
    """A file's name from rg, as the Python engine names it (not UTF-8: surrogateescape)."""
    if "text" in value:
        text: str = value["text"]
        return text
    return os.fsdecode(base64.b64decode(value["bytes"]))


def _still_inside(workspace: Workspace, matches: list[tuple[str, int, str]]) -> bool:
    shown = matches[0][0]
    try:
        real = workspace.resolve(names.shown(shown))  # the guard takes the name as shown
    except (ToolExecutionError, WorkspaceViolation):
        real = None
    if real != workspace.root / shown:
        logger.warning("grep drops %s: its path changed to lead through a symlink", shown)
        return False
    return True
