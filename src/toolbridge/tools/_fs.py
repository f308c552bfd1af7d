"""Shared ground for the built-in file tools: the workspace-bound base class and text rules.

Kept outside `toolbridge.tools` so that the loader, which builds every named tool it
finds there, sees only real tools. The text rules (`looks_binary`, `decode_text`) are
also what `web_fetch` uses, so every tool draws the text/binary line in one place.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from toolbridge.core.errors import ErrorKind, PolicyViolation, ToolError, ToolExecutionError
from toolbridge.core.pathlocks import PathLocks
from toolbridge.core.tool import TextBlock, Tool, ToolContext, ToolResult
from toolbridge.security import names
from toolbridge.security.workspace import InvalidPath, Workspace

__all__ = [
    "BINARY_SNIFF_BYTES",
    "SKIPPED_DIRS",
    "WorkspaceTool",
    "binary_file_error",
    "decode_text",
    "human_size",
    "looks_binary",
    "require_directory",
]

BINARY_SNIFF_BYTES = 8192

# Walks (list_dir recursive, glob, grep) list these but do not enter them: they are
# large, generated, and almost never what a model is looking for.
SKIPPED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "venv",
        "site-packages",
        "node_modules",
        ".hypothesis",
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
    }
)


class WorkspaceTool(Tool):
    """A tool bound to one `Workspace`, built from the loader's `ToolContext`.

    Subclasses implement `run`. A path that no workspace could accept (`InvalidPath`:
    a NUL byte, too long, a FIFO ...) comes back as an ``invalid_arguments`` error the
    model can fix, not as a workspace violation, which it must not retry.
    """

    def __init__(
        self,
        workspace: Workspace | str | os.PathLike[str],
        *,
        locks: PathLocks | None = None,
    ) -> None:
        # A directory given as a path gets its guard here: every path goes through one.
        self.workspace = workspace if isinstance(workspace, Workspace) else Workspace(workspace)
        # Tools that write one file must share these (the loader passes the context's);
        # a tool built alone gets its own.
        self.locks = locks if locks is not None else PathLocks()

    @classmethod
    def create(cls, ctx: ToolContext) -> Tool:
        return cls(Workspace(ctx.workspace), locks=ctx.file_locks)

    async def execute(self, **kwargs: Any) -> Any:
        try:
            return _names_shown(await self.run(**kwargs))
        except InvalidPath as exc:
            message, hint = names.shown(exc.message), names.shown(exc.hint)
            return ToolResult.error(ToolError(ErrorKind.INVALID_ARGUMENTS, message, hint))
        except (ToolExecutionError, PolicyViolation) as exc:
            exc.message = names.shown(exc.message)  # raised on: the registry classifies it
            exc.args = (exc.message,)
            if isinstance(exc, ToolExecutionError):
                exc.hint = names.shown(exc.hint)
            elif exc.target is not None:  # the loop guard may quote it to the model
                exc.target = names.shown(exc.target)
            raise

    def resolve_file(self, path: str) -> Path:
        """`resolve` for a tool that writes the file `path` names; `InvalidPath` if its
        spelling names a directory (``nd/``, ``nd/.``): the guard drops the ``/``, and
        ``nd/`` made a file ``nd``. The guard's own checks (length, NUL ...) come first."""
        real = self.workspace.resolve(path)
        last = path.rsplit("/", 1)[-1]
        if last in ("", ".", ".."):
            ending = "/" + last if "/" in path else last
            shown = path if len(path) <= 200 else path[:200] + "…"
            raise InvalidPath(
                f"{shown!r} names a directory (it ends with '{ending}'), not a file",
                hint="Give the path of the file itself, such as DIR/NAME; missing directories "
                "are created.",
            )
        return real

    async def run(self, **kwargs: Any) -> Any:
        """Do the tool's work with validated arguments (what `execute` is for other tools)."""
        raise NotImplementedError(f"tool {self.name!r} does not implement run()")


def _names_shown(value: Any) -> Any:
    """A file tool's result with every name that is not UTF-8 as the model is shown it
    (`names.shown`: byte 0xE9 as ``\\xe9``), which the guard resolves back; a lone
    surrogate in these texts can only come from such a name (file contents are read
    as strict UTF-8 or with replacement characters)."""
    if isinstance(value, str):
        return names.shown(value)
    if isinstance(value, ToolResult):
        content = value.content
        if isinstance(content, str):
            value.content = names.shown(content)
        else:
            value.content = [
                TextBlock(names.shown(block.text)) if isinstance(block, TextBlock) else block
                for block in content
            ]
        value.metadata = _names_shown(value.metadata)
        return value
    if isinstance(value, dict):
        return {_names_shown(key): _names_shown(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_names_shown(item) for item in value]
    return value


def looks_binary(head: bytes) -> bool:
    """Whether the first bytes of a file look binary (they hold a NUL byte)."""
    return b"\x00" in head[:BINARY_SNIFF_BYTES]


def binary_file_error(shown: str, where: str = "it contains NUL bytes") -> ToolExecutionError:
    """The error for a file that holds NUL bytes, so is not text (`where` says where)."""
    return ToolExecutionError(
        f"{shown} looks like a binary file ({where}); only text files can be read or edited",
        hint="Choose a text file, or use exec with a suitable program for binary data.",
    )


def decode_text(data: bytes, shown: str) -> str:
    """`data` as UTF-8 text (a leading BOM dropped), or an error saying why it is not text."""
    if looks_binary(data):
        raise binary_file_error(shown)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ToolExecutionError(
            f"{shown} is not UTF-8 text (undecodable byte at offset {exc.start}); it may "
            "be binary or use another encoding",
            hint="Only UTF-8 text files can be read or edited with this tool.",
        ) from None


def require_directory(real: Path, shown: str) -> None:
    """Refuse, with a hint, a resolved `path` argument that is not an existing directory."""
    if real.is_dir():
        return
    if real.is_file():
        raise ToolExecutionError(
            f"{shown} is a file, not a directory",
            hint="Give a directory as path (list_dir shows what is there), or read the file "
            "with read_file.",
        )
    if real.exists():  # a FIFO, socket or device: wrong as a path in any workspace
        raise InvalidPath(
            f"{shown} is not a directory",
            hint="Give a directory as path; list_dir shows what is there.",
        )
    raise ToolExecutionError(
        f"{shown} does not exist",
        hint="List the workspace root with list_dir to see what is there.",
    )


def human_size(size: int) -> str:
    """A byte count for people: 512 B, 3.4 KB, 1.2 MB."""
    if size < 1024:
        return f"{size} B"
    value = size / 1024
    for unit in ("KB", "MB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"
