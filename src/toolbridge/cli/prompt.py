"""Read a line the user types, such that Ctrl-C always ends the wait.

``input()`` loses a Ctrl-C that arrives between writing its prompt and starting its
blocking read (the signal is noted, then the read waits for Enter). Here the wait is a
``select`` on stdin and on a wake-up pipe that the interpreter writes to on every
signal, so a signal that arrives at any moment, even before the wait starts, ends it;
the handler raises `KeyboardInterrupt` right away, even inside ``asyncio.run`` (whose
own handler only cancels the main task, which a blocked prompt never sees).
"""

from __future__ import annotations

import os
import select
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TextIO

__all__ = ["ask_line", "confirm"]


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@contextmanager
def _woken_by_signals() -> Iterator[int]:
    """A pipe the interpreter writes a byte to on every signal (its read end), with
    Ctrl-C raising `KeyboardInterrupt`; both undone on the way out."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    previous_handler = signal.signal(signal.SIGINT, _interrupt)
    previous_fd = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    try:
        yield read_end
    finally:
        signal.set_wakeup_fd(previous_fd)
        signal.signal(signal.SIGINT, previous_handler)
        os.close(read_end)
        os.close(write_end)


def ask_line(prompt: str, *, stream: TextIO | None = None) -> str | None:
    """Show `prompt` on `stream` (stdout by default) and read one line from stdin,
    without its newline; None at the end of input. Ctrl-C raises `KeyboardInterrupt`."""
    shown = stream if stream is not None else sys.stdout
    stdin = sys.stdin.fileno()
    with _woken_by_signals() as woken:
        shown.write(prompt)
        shown.flush()
        line = bytearray()
        while True:
            ready, _, _ = select.select([stdin, woken], [], [])
            if woken in ready:
                os.read(woken, 512)  # another signal (a resized window): keep waiting
            if stdin not in ready:
                continue
            byte = os.read(stdin, 1)  # one byte at a time: nothing read past the line
            if not byte:
                return line.decode("utf-8", "replace") if line else None
            if byte == b"\n":
                return line.decode("utf-8", "replace")
            line += byte


def confirm(question: str) -> bool | None:
    """Ask `question` on stderr with `` [y/N]: ``: True for y/yes, False for anything
    else, None at the end of input."""
    answer = ask_line(f"{question} [y/N]: ", stream=sys.stderr)
    if answer is None:
        return None
    return answer.strip().lower() in ("y", "yes")
