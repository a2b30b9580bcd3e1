"""Bytes survive the trip through lines: encoding, BOM, CRLF/LF (even mixed), final newline."""

from __future__ import annotations

import codecs

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.core.text.textfile import MAX_BYTES, NotText, decode, encode

PIECE = st.sampled_from(["a", "é", "  x", "", "\t", "€", "\r", "z z"])
EOL = st.sampled_from(["\n", "\r\n"])
BOM = st.sampled_from([("utf-8", b""), ("utf-8", codecs.BOM_UTF8), ("utf-16-le", codecs.BOM_UTF16_LE),
                       ("utf-16-be", codecs.BOM_UTF16_BE), ("utf-32-le", codecs.BOM_UTF32_LE)])


@given(st.lists(st.tuples(PIECE, EOL), max_size=12), st.booleans(), BOM)
def test_round_trip_is_byte_exact(lines, final, enc):
    encoding, bom = enc
    text = "".join(p + e for p, e in lines)
    if lines and not final:
        text = text[: -len(lines[-1][1])]
    raw = bom + text.encode(encoding)
    got, fmt = decode(raw)
    assert encode(got, fmt, got) == raw


def test_crlf_file_gets_crlf_lines_and_keeps_missing_final_newline():
    lines, fmt = decode(b"one\r\ntwo")
    assert lines == ["one", "two"] and fmt.newline == "\r\n" and not fmt.final_newline
    assert encode(["one", "new", "two"], fmt) == b"one\r\nnew\r\ntwo"


def test_mixed_endings_keep_each_line_own_terminator():
    raw = b"a\r\nb\nc\r\nd\n"
    lines, fmt = decode(raw)
    out = encode(["a", "b", "inserted", "c", "d"], fmt, lines)
    assert out.startswith(b"a\r\nb\n") and out.endswith(b"c\r\nd\n") and b"inserted" in out


def test_bom_is_kept():
    lines, fmt = decode(codecs.BOM_UTF8 + b"x\n")
    assert lines == ["x"]
    assert encode(["y"], fmt) == codecs.BOM_UTF8 + b"y\n"


@pytest.mark.parametrize("raw,why", [
    (b"PNG\x00\x01\x02", "binary"),
    (b"caf\xe9 au lait\n", "not valid UTF-8"),
])
def test_refuses_what_it_cannot_round_trip(raw, why):
    with pytest.raises(NotText, match=why):
        decode(raw, "f")


def test_refuses_huge_files():
    with pytest.raises(NotText, match="MiB"):
        decode(b"a" * (MAX_BYTES + 1), "big")
