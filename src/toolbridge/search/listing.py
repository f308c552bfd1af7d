"""Listing the files a search looks at: the same files, in the same order, on both engines.

A listing holds the regular files under a directory of the workspace, up to a depth,
without following symlinks, leaving out what ``.gitignore`` ignores and the generated
directories of `toolbridge.tools._fs.SKIPPED_DIRS` and toolbridge's own ``.toolbridge`` folder;
hidden files are included. The order is that of a depth-first walk with each directory
sorted by name.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from toolbridge.search.gitignore import IgnoreRules, rebase_gitignore
from toolbridge.search.ripgrep import deadline_at, run_ripgrep
from toolbridge.security.control import CONTROL_DIR
from toolbridge.security.workspace import EntryKind, Workspace
from toolbridge.tools._fs import SKIPPED_DIRS

__all__ = ["MAX_LISTED_FILES", "Listing", "python_listing", "ripgrep_listing"]

MAX_LISTED_FILES = 200_000
_CONTROL_PREFIX = CONTROL_DIR + "/"


@dataclass(slots=True)
class Listing:
    """The files found (paths relative to the workspace root, in walk order), and whether
    the listing was cut short."""

    files: list[str] = field(default_factory=list)
    timed_out: bool = False  # the deadline passed while listing
    capped: bool = False  # more than `MAX_LISTED_FILES` files: the rest were left out


def _walk_order(relative: str) -> list[str]:
    return relative.split("/")


def python_listing(workspace: Workspace, base: Path, *, max_depth: int, stop: float) -> Listing:
    """The listing of the directory `base`, walked in Python through the guard (blocking)."""
    rules = IgnoreRules(workspace)

    def leave_out(path: Path, kind: EntryKind) -> bool:
        if kind == "dir":
            return path.name in SKIPPED_DIRS or rules.ignored(path, is_dir=True)
        return kind != "file" or rules.ignored(path, is_dir=False)

    listing = Listing()
    walk = workspace.walk(base, max_depth=max_depth, leave_out=leave_out)
    try:
        for entry in walk:
            if time.monotonic() >= stop:
                listing.timed_out = True
                break
            if entry.kind != "file":
                continue
            if len(listing.files) == MAX_LISTED_FILES:
                listing.capped = True
                break
            listing.files.append(workspace.relative(entry.path))
    finally:
        walk.close()
    return listing


# Only .gitignore files count, read from the search directory down; a .gitignore above
# the search directory but inside the workspace is passed in with --ignore-file.
RIPGREP_LISTING_FLAGS = (
    "--files", "--null", "--hidden", "--no-require-git", "--no-ignore-global",
    "--no-ignore-exclude", "--no-ignore-dot", "--no-ignore-parent",
    *(f"--glob=!{name}/" for name in sorted(SKIPPED_DIRS)),
)  # fmt: skip


async def ripgrep_listing(
    rg: str, workspace: Workspace, base: Path, *, max_depth: int, stop: float
) -> Listing:
    """The listing of the directory `base`, by ``rg --files``, sorted into walk order."""
    shown = workspace.relative(base)
    with tempfile.TemporaryDirectory(prefix="toolbridge-rg-") as scratch:
        arguments = [*RIPGREP_LISTING_FLAGS, f"--max-depth={max_depth}"]
        ignore_file = await asyncio.to_thread(_write_inherited_rules, workspace, shown, scratch)
        if ignore_file is not None:
            arguments.append(f"--ignore-file={ignore_file}")
        listing = Listing()
        chunks: list[bytes] = []
        async with run_ripgrep(rg, [*arguments, "--", shown], workspace.root, stop) as output:
            try:
                async with asyncio.timeout_at(deadline_at(stop)):
                    while chunk := await output.read(1 << 16):
                        chunks.append(chunk)
            except TimeoutError:
                listing.timed_out = True
    names = [os.fsdecode(raw) for raw in b"".join(chunks).split(b"\0") if raw]
    if listing.timed_out and names:
        names.pop()  # the last name may be cut in the middle
    names = [name.removeprefix("./") for name in names]
    # toolbridge's own folder is never listed (the Python walk leaves it out the same way).
    names = [name for name in names if not name.startswith(_CONTROL_PREFIX)]
    names.sort(key=_walk_order)
    if len(names) > MAX_LISTED_FILES:
        del names[MAX_LISTED_FILES:]
        listing.capped = True
    listing.files = names
    return listing


def _write_inherited_rules(workspace: Workspace, shown: str, scratch: str) -> str | None:
    """Write the .gitignore rules of the directories above `shown` up to the root,
    rewritten to apply from the root, into a file in `scratch`; its path, or None when
    there are none (ripgrep reads only those at and below the directory it lists)."""
    if shown == ".":
        return None
    rules = IgnoreRules(workspace)
    parts = shown.split("/")
    lines: list[str] = []
    for depth in range(len(parts)):
        directory = "/".join(parts[:depth])
        text = rules.text_of(directory)
        if text is not None:
            lines.extend(rebase_gitignore(text, directory))
    if not lines:
        return None
    path = os.path.join(scratch, "inherited.gitignore")
    with open(path, "w", encoding="utf-8") as out:
        out.write("\n".join(lines) + "\n")
    return path
