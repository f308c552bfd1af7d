"""The regex half of the grep tool, run as its own process so that it can be killed.

Python's `re` cannot be interrupted mid-match and holds the GIL while it backtracks,
so a catastrophic pattern would freeze a thread and the event loop with it. The grep
tool runs this script (``python -I -S grep_worker.py``, standard library only) and
kills it at its deadline. The worker never touches the filesystem: the tool reads
files through the workspace guard and sends their text here.

Protocol, one JSON value per line. In: ``{"pattern", "ignore_case", "max_matches",
"max_chars"}``, then ``[path, text]`` per file. Out: ``["match", path, line, excerpt]``
per matching line and ``["done", path]`` after each file; the worker exits after
`max_matches` matches or at the end of its input.
"""

from __future__ import annotations

import json
import re
import sys


def excerpt(line: str, match_start: int, max_chars: int) -> str:
    """`line`, or at most `max_chars` of it around the match at `match_start`."""
    if len(line) <= max_chars:
        return line
    start = max(0, min(match_start - max_chars // 4, len(line) - max_chars))
    cut = line[start : start + max_chars]
    return ("…" if start else "") + cut + ("…" if start + max_chars < len(line) else "")


def main() -> None:
    source = sys.stdin.buffer
    out = sys.stdout
    request = json.loads(source.readline())
    flags = re.IGNORECASE if request["ignore_case"] else 0
    regex = re.compile(request["pattern"], flags)
    # One scan of the whole text (in C) rules out most files before the per-line loop.
    # A line that matches on its own then also matches inside the text, unless the
    # pattern sees past the line: \A, \Z, negative lookarounds, an inline flag group
    # that turns flags off (``(?-m:x$)`` undoes the MULTILINE added here), or a CR.
    prefilter = None
    if not re.search(r"\\[AZ]|\(\?(<[=!]|!)|\(\?[a-zA-Z]*-", request["pattern"]):
        prefilter = re.compile(request["pattern"], flags | re.MULTILINE)
    remaining: int = request["max_matches"]
    max_chars: int = request["max_chars"]
    for raw in source:
        path, text = json.loads(raw)
        if prefilter is not None and "\r" not in text and prefilter.search(text) is None:
            out.write(json.dumps(["done", path]) + "\n")
            continue
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        for number, raw_line in enumerate(lines, 1):
            line = raw_line.removesuffix("\r")
            match = regex.search(line)
            if match is None:
                continue
            out.write(json.dumps(["match", path, number, excerpt(line, match.start(), max_chars)]))
            out.write("\n")
            remaining -= 1
            if remaining == 0:
                out.flush()
                return
        out.write(json.dumps(["done", path]) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
