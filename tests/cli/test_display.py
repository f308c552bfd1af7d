"""`toolbridge.cli.display`: the one way the command line shows untrusted text."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from tests.cli.hostile_text import HOSTILE, IN_ARGV, bad_characters

from toolbridge.cli.display import SafeFormatter, clean, json_text, plain, show


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("plain text, ünïcode, 中文", "plain text, ünïcode, 中文"),
        ("tab\tand\nnewline", "tab\tand\nnewline"),
        ("a\x1b]0;title\x07b", "a\\x1b]0;title\\x07b"),
        ("\x9b2J\x9d0;t\x9c", "\\x9b2J\\x9d0;t\\x9c"),
        ("line\r\nend", "line\nend"),  # a Windows line end
        ("hidden\roverwrite", "hidden\\x0doverwrite"),  # a lone CR cannot overwrite
        ("nul\x00del\x7f", "nul\\x00del\\x7f"),
        ("abc\u202edef\u2066x\u2069", "abc\\u202edef\\u2066x\\u2069"),
        ("[/x] [bold]:smile:", "[/x] [bold]:smile:"),
        ("zero\u200bwidth\u200fmark\ufeff", "zero\\u200bwidth\\u200fmark\\ufeff"),
        ("tag\U000e0068\U000e0069", "tag\\U000e0068\\U000e0069"),  # hidden text
    ],
)
def test_clean_escapes_what_a_terminal_acts_on(raw: str, shown: str) -> None:
    assert clean(raw) == shown
    assert not bad_characters(clean(raw))


def test_every_format_character_is_escaped_in_text_and_in_json() -> None:
    """Each character of Unicode's format category (Cf) this Python knows (bidi, zero
    width, tags...) is shown escaped, and JSON gives it back exactly."""
    import unicodedata

    formats = "".join(ch for ch in map(chr, range(0x110000)) if unicodedata.category(ch) == "Cf")
    assert not bad_characters(clean(formats))
    text = json_text({"x": formats})
    assert not bad_characters(text) and json.loads(text) == {"x": formats}


def test_printed_text_is_never_markup_nor_emoji() -> None:
    console = Console(file=io.StringIO(), width=400, emoji=False)
    show(console, "[/x] :smile: ", ("[bold red]x[/bold red]", "dim"), " \x1b[2J")
    console.print(plain("[/dim]"))
    printed = console.file.getvalue()  # type: ignore[attr-defined]
    assert printed == "[/x] :smile: [bold red]x[/bold red] \\x1b[2J\n[/dim]\n"


def test_json_text_is_exact_and_inert() -> None:
    value = {HOSTILE: [HOSTILE, "中文", "\ud800"]}
    text = json_text(value, indent=2)
    assert not bad_characters(text)
    # exact, but for the lone surrogate: no character, written as its six (strict JSON)
    assert json.loads(text) == {HOSTILE: [HOSTILE, "中文", "\\ud800"]}
    assert "中文" in text  # non-ASCII text stays readable


def test_safe_formatter_cleans_message_arguments_and_traceback() -> None:
    try:
        raise RuntimeError(f"boom {HOSTILE}")
    except RuntimeError as exc:
        record = logging.LogRecord(
            "toolbridge.x", logging.WARNING, __file__, 1, "server %r: %s", ("n", HOSTILE),
            (type(exc), exc, exc.__traceback__),
        )  # fmt: skip
    text = SafeFormatter("%(levelname)s %(message)s").format(record)
    assert not bad_characters(text)
    assert "[/x]" in text and "Traceback" in text and "\\x9b31m" in text


def test_other_libraries_warnings_are_cleaned_too(tmp_path: Path) -> None:
    """A warning of a library the CLI does not configure (the MCP SDK, httpx) reaches
    stderr through Python's last-resort handler: cleaned like the CLI's own records."""
    code = (
        "import logging, sys\n"
        "from toolbridge.cli.app import configure_logging\n"
        "configure_logging(False)\n"
        "logging.getLogger('some.sdk').warning('bad line: %s', sys.argv[1])\n"
        "logging.getLogger('toolbridge.x').warning('quiet without -v')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, IN_ARGV], capture_output=True, timeout=60, check=False
    )
    stderr = done.stderr.decode()
    assert done.returncode == 0, stderr
    assert stderr.startswith("bad line: [/x]") and "quiet" not in stderr
    assert not bad_characters(stderr)
