"""The rules for text the service stores as a name (issue 35): one form per name, nothing hidden in it.

*Names* are what people read to tell things apart: dataset and API key display names, column names, categorical
levels, class labels. Two rules hold for every one of them, at every entry point (the upload's schema, the API's
request models, prediction rows):

1. **One form.** Text is compared and stored in Unicode Normalization Form C (NFC, UAX #15, :func:`nfc`). "é" may
   arrive precomposed (U+00E9) or as "e" + U+0301 COMBINING ACUTE ACCENT (NFD, e.g. from macOS file systems or some
   input methods); the two are canonically equivalent — they look the same — so they must be one level, one column
   name, one class. Declarations are normalised when validated, cells when matched against the declaration.
2. **Nothing hidden.** A name may not contain a character that is invisible or that changes how the text around it
   is displayed (:func:`refused_character`): with one, two names that look alike can differ (``"admin"`` and
   ``"ad\\u200bmin"``), or a name can display as another (``"txt.exe"`` written with U+202E RIGHT-TO-LEFT OVERRIDE
   shows as ``"exe.txt"``). Refused, with a 422 naming the field and the character (``contains U+202E
   RIGHT-TO-LEFT OVERRIDE``):

   * control characters (Unicode category Cc: C0, DEL, C1) and lone surrogates (Cs, which UTF-8 cannot store);
   * format characters (Cf), which include every bidirectional control — U+061C, U+200E, U+200F, U+202A–U+202E,
     U+2066–U+2069 — and the invisible U+00AD SOFT HYPHEN, U+200B ZERO WIDTH SPACE, U+200C ZERO WIDTH NON-JOINER,
     U+200D ZERO WIDTH JOINER, U+2060 WORD JOINER, U+FEFF ZERO WIDTH NO-BREAK SPACE and the tag characters;
     ZWJ and ZWNJ are refused too, although some emoji sequences and some Persian and Indic spellings use them: a
     name stays readable without them, and with them two names can look the same;
   * line and paragraph separators (Zl, Zp: U+2028, U+2029), which break a line like a newline;
   * the other invisible letters and marks Unicode lists as default-ignorable: the Hangul fillers (U+115F, U+1160,
     U+3164, U+FFA0), U+034F COMBINING GRAPHEME JOINER, the Khmer inherent vowels (U+17B4, U+17B5) and the Mongolian
     free variation selectors (U+180B–U+180D, U+180F).

   Variation selectors (U+FE00–U+FE0F, U+E0100–U+E01EF) are allowed: they choose a visible form of the character
   before them (emoji or text presentation of "❤"). Spaces inside a name are allowed; whether a name may start or
   end with one is the caller's rule.

The refused set is one table (:data:`REFUSED_RANGES`, Unicode 14.0, the database of Python 3.11): it drives the check
(:func:`refused_character`) and the JSON-schema pattern the OpenAPI document publishes (:func:`name_pattern`);
``tests/test_text_rules.py`` checks the table against the running Python's Unicode database.

Cell values are private data and are not checked: a cell holding such a character simply matches no declared level.
"""

from __future__ import annotations

import re
import unicodedata

from pydantic_core import PydanticCustomError

__all__ = [
    "REFUSED_RANGES",
    "checked_name",
    "describe_character",
    "name_pattern",
    "nfc",
    "refused_character",
]

#: The code points a name may not contain (module docstring), as inclusive ranges: Cc, Cf, Zl, Zp and the other
#: default-ignorable letters and marks, except variation selectors. Lone surrogates (Cs) are refused as well.
REFUSED_RANGES: tuple[tuple[int, int], ...] = (
    (0x0000, 0x001F), (0x007F, 0x009F), (0x00AD, 0x00AD), (0x034F, 0x034F), (0x0600, 0x0605), (0x061C, 0x061C),
    (0x06DD, 0x06DD), (0x070F, 0x070F), (0x0890, 0x0891), (0x08E2, 0x08E2), (0x115F, 0x1160), (0x17B4, 0x17B5),
    (0x180B, 0x180F), (0x200B, 0x200F), (0x2028, 0x202E), (0x2060, 0x2064), (0x2066, 0x206F), (0x3164, 0x3164),
    (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF9, 0xFFFB), (0x110BD, 0x110BD), (0x110CD, 0x110CD),
    (0x13430, 0x13438), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0001, 0xE0001), (0xE0020, 0xE007F),
)  # fmt: skip

_SURROGATES = (0xD800, 0xDFFF)


def _class_item(code: int) -> str:
    """One code point inside a regex character class: ``\\uXXXX`` in the BMP (ECMA-262 and Python alike), the
    character itself beyond it: ECMA-262 and Python share no escape for it, and JSON Schema 2020-12 (§6.4, the
    dialect of OpenAPI 3.1) reads patterns with the ``u`` flag, under which a literal astral character is one."""
    return f"\\u{code:04x}" if code <= 0xFFFF else chr(code)


def _class(ranges: tuple[tuple[int, int], ...]) -> str:
    return "".join(_class_item(lo) if lo == hi else f"{_class_item(lo)}-{_class_item(hi)}" for lo, hi in ranges)


_REFUSED = re.compile(f"[{_class((*REFUSED_RANGES, _SURROGATES))}]")


def name_pattern() -> str:
    """The JSON-schema (ECMA-262) ``pattern`` of a name: none of :data:`REFUSED_RANGES` (surrogates, which JSON
    text in UTF-8 cannot carry, are left to the server's check)."""
    return f"^[^{_class(REFUSED_RANGES)}]*$"


def nfc(text: str) -> str:
    """``text`` in Unicode Normalization Form C (ASCII and already-NFC text returned as is, without a copy)."""
    if text.isascii() or unicodedata.is_normalized("NFC", text):
        return text
    return unicodedata.normalize("NFC", text)


def refused_character(text: str) -> str | None:
    """The first character of ``text`` a name may not contain (module docstring), or None."""
    found = _REFUSED.search(text)
    return None if found is None else found.group()


def describe_character(char: str) -> str:
    """``"U+202E RIGHT-TO-LEFT OVERRIDE"``: the code point and its Unicode name (controls and surrogates have none:
    ``"U+0000 (a control character)"``)."""
    code = f"U+{ord(char):04X}"
    name = unicodedata.name(char, "")
    if name:
        return f"{code} {name}"
    kind = {"Cc": "a control character", "Cs": "a lone surrogate"}.get(unicodedata.category(char), "unnamed")
    return f"{code} ({kind})"


_HIDDEN = "must not contain control characters, bidirectional controls or invisible characters: contains {character}"


def checked_name(text: str) -> str:
    """A name in NFC, or a ``hidden_character`` error naming the first refused character (a pydantic
    ``AfterValidator``: pydantic reports it at the field's location, so the 422 names both field and character)."""
    char = refused_character(text)
    if char is not None:
        raise PydanticCustomError("hidden_character", _HIDDEN, {"character": describe_character(char)})
    return nfc(text)
