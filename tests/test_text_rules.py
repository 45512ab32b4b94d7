"""The rules for names (privfit.text, issue 35): NFC normalisation and the refusal of hidden characters."""

from __future__ import annotations

import re
import unicodedata

import pytest
from pydantic import TypeAdapter, ValidationError
from pydantic_core import PydanticCustomError

from privfit.api.identifiers import NAME_PATTERN, DisplayName
from privfit.text import REFUSED_RANGES, checked_name, describe_character, name_pattern, nfc, refused_character

BIDI_CONTROLS = {
    "\u061c": "ARABIC LETTER MARK",
    "\u200e": "LEFT-TO-RIGHT MARK",
    "\u200f": "RIGHT-TO-LEFT MARK",
    "\u202a": "LEFT-TO-RIGHT EMBEDDING",
    "\u202b": "RIGHT-TO-LEFT EMBEDDING",
    "\u202c": "POP DIRECTIONAL FORMATTING",
    "\u202d": "LEFT-TO-RIGHT OVERRIDE",
    "\u202e": "RIGHT-TO-LEFT OVERRIDE",
    "\u2066": "LEFT-TO-RIGHT ISOLATE",
    "\u2067": "RIGHT-TO-LEFT ISOLATE",
    "\u2068": "FIRST STRONG ISOLATE",
    "\u2069": "POP DIRECTIONAL ISOLATE",
}
INVISIBLE = {  # format characters (Cf), separators (Zl, Zp) and default-ignorable letters and marks
    "\u00ad": "SOFT HYPHEN",
    "\u200b": "ZERO WIDTH SPACE",
    "\u200c": "ZERO WIDTH NON-JOINER",
    "\u200d": "ZERO WIDTH JOINER",
    "\u2060": "WORD JOINER",
    "\ufeff": "ZERO WIDTH NO-BREAK SPACE",
    "\U000e0041": "TAG LATIN CAPITAL LETTER A",
    "\u2028": "LINE SEPARATOR",
    "\u2029": "PARAGRAPH SEPARATOR",
    "\u3164": "HANGUL FILLER",
    "\u034f": "COMBINING GRAPHEME JOINER",
}
CONTROLS = ["\x00", "\t", "\n", "\x1b", "\x7f", "\x85", "\x9b"]  # C0, DEL, C1
ALLOWED = ["age", "hours per week", "café", "naïve", "北京", "Ελλάδα", "שלום", "مرحبا", "😀", "❤\ufe0f", "a\u00a0b"]


def refusal(text: str) -> str:
    with pytest.raises(PydanticCustomError) as info:
        checked_name(text)
    assert info.value.type == "hidden_character"
    return info.value.message()


@pytest.mark.parametrize("char", sorted({**BIDI_CONTROLS, **INVISIBLE}))
def test_bidirectional_and_invisible_characters_are_refused_by_name(char: str):
    name = {**BIDI_CONTROLS, **INVISIBLE}[char]
    message = refusal(f"txt{char}exe")
    assert f"contains U+{ord(char):04X} {name}" in message and unicodedata.name(char) == name
    assert char not in message  # the message names the character; it does not carry it


@pytest.mark.parametrize("char", [*CONTROLS, "\ud800"])
def test_control_characters_and_lone_surrogates_are_refused(char: str):
    kind = "a lone surrogate" if char == "\ud800" else "a control character"
    assert f"contains U+{ord(char):04X} ({kind})" in refusal(f"a{char}b")


@pytest.mark.parametrize("text", ALLOWED)
def test_visible_text_of_any_script_is_allowed(text: str):
    assert checked_name(text) == unicodedata.normalize("NFC", text)


def test_names_are_put_in_nfc():
    assert checked_name("e\u0301") == "\u00e9" == nfc("e\u0301")
    assert nfc("Cafe\u0301 au lait") == "Caf\u00e9 au lait"
    assert nfc("\u212b") == "\u00c5"  # ANGSTROM SIGN: a canonical singleton
    ascii_text = "plain"
    assert nfc(ascii_text) is ascii_text  # no copy on the common path


def test_the_table_is_the_running_unicode_databases_categories():
    """REFUSED_RANGES (which the check and the published pattern share) is exactly Cc ∪ Cf ∪ Zl ∪ Zp plus the listed
    default-ignorable letters and marks, in this Python's Unicode database: a newer database fails here."""
    extra = {0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180B, 0x180C, 0x180D, 0x180F, 0x3164, 0xFFA0}
    expected = {c for c in range(0x110000) if unicodedata.category(chr(c)) in ("Cc", "Cf", "Zl", "Zp")} | extra
    table = {c for lo, hi in REFUSED_RANGES for c in range(lo, hi + 1)}
    assert table == expected, sorted(table ^ expected)


def test_the_published_pattern_refuses_exactly_what_the_check_refuses():
    pattern = re.compile(name_pattern())
    assert name_pattern() == NAME_PATTERN
    samples = [*BIDI_CONTROLS, *INVISIBLE, *CONTROLS, *ALLOWED, "\U000e007f", "\U0001d173", "\U000e0100"]
    for lo, hi in REFUSED_RANGES:
        samples += [chr(c) for c in (lo - 1, lo, hi, hi + 1) if c >= 0]
    for text in samples:
        assert (pattern.fullmatch(text) is None) == (refused_character(text) is not None), ascii(text)


def test_display_names_follow_the_rules():
    adapter = TypeAdapter(DisplayName)
    assert adapter.validate_python("Cafe\u0301") == "Caf\u00e9"
    with pytest.raises(ValidationError, match="contains U\\+202E RIGHT-TO-LEFT OVERRIDE"):
        adapter.validate_python("report\u202efdp.exe")


def test_describe_character():
    assert describe_character("\u202e") == "U+202E RIGHT-TO-LEFT OVERRIDE"
    assert describe_character("\x00") == "U+0000 (a control character)"
    assert describe_character("\U000e0001") == "U+E0001 LANGUAGE TAG"
