"""What counts as an invisible character, typed from the Unicode Character Database, not
taken from the app (app/core/text/invisible.py derives its set from the `regex` module's
property tables; the tests compare the two).

From Unicode 15.0's files, unchanged through 17.0: DerivedCoreProperties.txt
(Default_Ignorable_Code_Point), UnicodeData.txt (general categories Cf, Cc, Zl, Zp) and
PropList.txt (Bidi_Control). A later Unicode that adds one fails tests/test_invisible_set.py:
add it here, from the new files, after reading what it is.
"""

from __future__ import annotations


def _ranges(*spans: tuple[int, int] | int) -> frozenset[int]:
    out: set[int] = set()
    for s in spans:
        a, b = (s, s) if isinstance(s, int) else s
        out.update(range(a, b + 1))
    return frozenset(out)


DEFAULT_IGNORABLE = _ranges(
    0x00AD, 0x034F, 0x061C, (0x115F, 0x1160), (0x17B4, 0x17B5), (0x180B, 0x180D), 0x180E,
    0x180F, (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x2064), 0x2065, (0x2066, 0x206F),
    0x3164, (0xFE00, 0xFE0F), 0xFEFF, 0xFFA0, (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A), 0xE0000, 0xE0001, (0xE0002, 0xE001F), (0xE0020, 0xE007F),
    (0xE0080, 0xE00FF), (0xE0100, 0xE01EF), (0xE01F0, 0xE0FFF))
FORMAT = _ranges(  # Cf
    0x00AD, (0x0600, 0x0605), 0x061C, 0x06DD, 0x070F, (0x0890, 0x0891), 0x08E2, 0x180E,
    (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x2064), (0x2066, 0x206F), 0xFEFF,
    (0xFFF9, 0xFFFB), 0x110BD, 0x110CD, (0x13430, 0x1343F), (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A), 0xE0001, (0xE0020, 0xE007F))
CONTROL = _ranges((0x0000, 0x001F), (0x007F, 0x009F))  # Cc
SEPARATOR = _ranges(0x2028, 0x2029)  # Zl, Zp
BIDI_CONTROL = _ranges(0x061C, (0x200E, 0x200F), (0x202A, 0x202E), (0x2066, 0x2069))

LAYOUT = frozenset({0x09, 0x0A})  # tab and newline: layout, never flagged
PRESENTATION = frozenset({0xFE0E, 0xFE0F})
# everything hidden, wherever it stands (a presentation selector: see `hidden_at`)
HIDDEN = (DEFAULT_IGNORABLE | FORMAT | CONTROL | SEPARATOR | BIDI_CONTROL) - LAYOUT - PRESENTATION


def hidden_at(s: str, i: int) -> bool:
    """The character at `i` of `s` is hidden: in the set, or a presentation selector that
    does not directly follow a visible non-ASCII character (an emoji's own selector, as in
    U+26A0 U+FE0F, is not; one after a letter, a digit, another selector or nothing is)."""
    cp = ord(s[i])
    if cp in PRESENTATION:
        before = ord(s[i - 1]) if i else None
        return before is None or before < 0x80 or before in HIDDEN or before in PRESENTATION
    return cp in HIDDEN


def points(lines: list[str]) -> set[str]:
    """The hidden characters of `lines`, as "U+3164"."""
    return {f"U+{ord(t[i]):04X}" for t in lines for i in range(len(t)) if hidden_at(t, i)}


def holds_any(text: str) -> bool:
    """`text` holds a hidden character or a presentation selector, wherever it stands: what
    may never reach a screen (the view escapes the one and drops the other)."""
    return any(ord(c) in HIDDEN or ord(c) in PRESENTATION for c in text)
