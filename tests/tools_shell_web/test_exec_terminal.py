"""strip_control_sequences: what it removes, and that plain text passes unchanged."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolbridge.security.terminal import strip_control_sequences

CONTROLS = {chr(c) for c in [*range(0x20), *range(0x7F, 0xA0)]} - {"\t", "\n"}


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("a\x1b[1;31mred\x1b[0m", "ared"),  # SGR colour
        ("x\x1b[2J\x1b[H\x1b[?25ly", "xy"),  # clear screen, home, hide cursor
        ("x\x1b]52;c;cm0gLXJmIH4=\x07y", "xy"),  # OSC 52 clipboard write, BEL
        ("x\x1b]52;c;cm0=\x1b\\y", "xy"),  # ... ended by ST
        ("x\x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\", "xlink"),  # hyperlink
        ("cut \x1b]52;c;AAAA", "cut "),  # unterminated at the end of the text
        ("x\x1bP1$r0m\x1b\\y", "xy"),  # DCS
        ("x\x1b_apc\x1b\\y\x1b^pm\x07z", "xyz"),  # APC, PM
        ("x\x9b31my\x9d0;t\x9cz", "xyz"),  # 8-bit CSI and OSC
        ("x\x1bcy\x1b(Bz\x1b7w", "xyzw"),  # reset, charset, save cursor
        ("a\r\nb\rc", "a\nb\nc"),  # a carriage return cannot hide a line
        ("a\x08\x08b\x00c\x7fd", "abcd"),
        ("tab\tand\nnewline", "tab\tand\nnewline"),
        ("naïve café 😀 ﬁ", "naïve café 😀 ﬁ"),
    ],
)
def test_removes_control_sequences(raw: str, clean: str) -> None:
    assert strip_control_sequences(raw) == clean


@given(st.text())
def test_no_control_character_survives(text: str) -> None:
    assert not CONTROLS & set(strip_control_sequences(text))


@given(st.text(alphabet=st.characters(blacklist_characters=sorted(CONTROLS))))
def test_text_without_controls_is_unchanged(text: str) -> None:
    assert strip_control_sequences(text) == text
