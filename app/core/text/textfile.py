"""Bytes <-> lines, keeping everything a file's owner would notice.

A file is held as lines without their terminators plus a `TextFormat` that remembers the
encoding, BOM, dominant newline, trailing-newline state and, for files that mix CRLF and
LF, each line's own terminator. `encode(decode(b))` gives back `b` byte for byte.
"""

from __future__ import annotations

import codecs
import difflib
import hashlib
from dataclasses import dataclass

MAX_BYTES = 8 * 1024 * 1024  # beyond this a file is not something to stream edits into

_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),  # before UTF-16 LE: it shares the first two bytes
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


class NotText(ValueError):
    """The file is binary, not in an encoding steer can round-trip, or too large."""


@dataclass(frozen=True, slots=True)
class TextFormat:
    encoding: str = "utf-8"
    bom: bytes = b""
    newline: str = "\n"  # dominant terminator, used for lines steer writes
    final_newline: bool = True
    eols: tuple[str, ...] | None = None  # per line, only when the file mixes terminators


def digest(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def decode(raw: bytes, name: str = "file") -> tuple[list[str], TextFormat]:
    if len(raw) > MAX_BYTES:
        raise NotText(f"{name} is {len(raw) / 1e6:.1f} MB; steer edits files up to {MAX_BYTES // 2**20} MiB")
    bom, encoding = b"", "utf-8"
    for mark, enc in _BOMS:
        if raw.startswith(mark):
            bom, encoding = mark, enc
            break
    body = raw[len(bom):]
    if not bom and b"\0" in body[:8192]:
        raise NotText(f"{name} is a binary file; steer does not edit binary files")
    try:
        text = body.decode(encoding)
    except UnicodeDecodeError as exc:
        raise NotText(
            f"{name} is not valid {encoding.upper()} (byte 0x{body[exc.start]:02x} at offset "
            f"{exc.start + len(bom)}); steer leaves it untouched"
        ) from None
    if not text:
        return [], TextFormat(encoding, bom)
    parts = text.split("\n")
    final_newline = parts[-1] == ""
    if final_newline:
        parts.pop()
    lines: list[str] = []
    eols: list[str] = []
    crlf = 0
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if part.endswith("\r") and (not last or final_newline):
            lines.append(part[:-1])
            eols.append("\r\n")
            crlf += 1
        else:
            lines.append(part)
            eols.append("\n")
    terminated = len(parts) if final_newline else len(parts) - 1
    lf = terminated - crlf
    newline = "\r\n" if crlf > lf else "\n"
    mixed = crlf and lf
    return lines, TextFormat(
        encoding, bom, newline, final_newline, tuple(eols[:terminated]) if mixed else None
    )


def encode(lines: list[str], fmt: TextFormat, base_lines: list[str] | None = None) -> bytes:
    """Serialise `lines` in `fmt`. For mixed-terminator files, lines that match `base_lines`
    (the lines `fmt` was read with) keep their own terminator; new lines get the dominant one."""
    if not lines:
        return fmt.bom
    if fmt.eols is None or base_lines is None:
        text = fmt.newline.join(lines)
        if fmt.final_newline:
            text += fmt.newline
    else:
        eols = [fmt.newline] * len(lines)
        matcher = difflib.SequenceMatcher(None, base_lines, lines, autojunk=False)
        for a, b, size in matcher.get_matching_blocks():
            for k in range(size):
                if a + k < len(fmt.eols):
                    eols[b + k] = fmt.eols[a + k]
        text = "".join(line + eol for line, eol in zip(lines, eols, strict=True))
        if not fmt.final_newline:
            text = text[: -len(eols[-1])]
    return fmt.bom + text.encode(fmt.encoding)
