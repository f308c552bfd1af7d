"""An output whose encoding is not UTF-8 (``PYTHONIOENCODING=latin-1``, a C locale with
Python's UTF-8 mode and locale coercion turned off) cannot encode every character a
tool, a file or a skill may hold: each command still prints, with such a character as
its escape (``\\u65e5``) in text and as its JSON escape in ``--json`` (the exact text
comes back). Before, a table, a result or a JSON line holding one ended the command
with 'internal error: UnicodeEncodeError', exit 4."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.cli.conftest import Cli
from tests.cli.hostile_text import bad_characters
from tests.cli.test_untrusted_text import run

WORLD = "caf\u00e9 \u65e5\u672c \U0001f600 \u0430dmin"  # Latin-1, CJK, beyond U+FFFF, Cyrillic
PLUGIN = f"""
    from toolbridge import tool

    @tool(description={WORLD!r}, read_only=True)
    def world(q: str = "") -> str:
        return {WORLD!r}
"""
ENCODINGS = {
    "latin-1": {"PYTHONIOENCODING": "latin-1"},
    "ascii": {"PYTHONIOENCODING": "ascii"},
    "C locale": {"LC_ALL": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"},
}


@pytest.fixture
def world(cli: Cli) -> Cli:
    cli.plugin("world_plugin", PLUGIN, {"world": "world_plugin:world"})
    skill = cli.workspace / ".toolbridge" / "skills" / "world"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(f"---\nname: world\ndescription: {WORLD}\n---\n{WORLD}\n")
    return cli


def _printed(raw: bytes, encoding: str) -> str:
    """`raw` as the terminal reads it: in its encoding, with nothing it would act on."""
    text = raw.decode("ascii" if encoding == "C locale" else encoding)
    assert not bad_characters(text) and b"\x1b" not in raw, raw[-2000:]
    return text


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize(
    "args",
    [("tools",), ("call", "world"), ("skills", "list"), ("skills", "show", "world")],
)
def test_text_the_output_cannot_encode_is_printed_escaped(
    world: Cli, encoding: str, args: tuple[str, ...]
) -> None:
    done = run(world, *args, env=ENCODINGS[encoding])
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    out = _printed(done.stdout, ENCODINGS[encoding].get("PYTHONIOENCODING", "C locale"))
    _printed(done.stderr, ENCODINGS[encoding].get("PYTHONIOENCODING", "C locale"))
    assert "\\u65e5\\u672c" in out


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize(
    "args",
    [("tools", "--json"), ("call", "world", "--json"), ("skills", "list", "--json")],
)
def test_json_the_output_cannot_encode_keeps_the_exact_text(
    world: Cli, encoding: str, args: tuple[str, ...]
) -> None:
    done = run(world, *args, env=ENCODINGS[encoding])
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    out = _printed(done.stdout, ENCODINGS[encoding].get("PYTHONIOENCODING", "C locale"))
    assert WORLD in json.dumps(json.loads(out), ensure_ascii=False)


def test_a_utf8_output_prints_the_text_as_it_is(world: Cli, tmp_path: Path) -> None:
    done = run(world, "call", "world", env={"PYTHONIOENCODING": "utf-8"})
    assert done.returncode == 0 and done.stdout.decode() == f"{WORLD}\n"
