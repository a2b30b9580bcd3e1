"""One file's tags: the names it defines (with their line and the line's text, the map's
"signature"), read with tree-sitter where steer has a tag query for the language (queries.py),
else from Pygments tokens; and the names it uses: its identifiers, counted.

Tags are plain tuples so that they cross a process boundary and go to the disk cache as they
are (marshal), without a class to rebuild per definition:

    Tags = (defs, refs)
    defs = ((name, line, kind, text), ...)   in file order; line is 1-based
    refs = ((name, count), ...)              sorted by name

`read_and_extract` is what the build's worker processes run: py-tree-sitter holds the GIL
while it parses (measured: two threads parse no faster than one), so a cold build parses in
other processes and the app's own threads stay free for the UI.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import sys
from collections import Counter
from functools import cache, lru_cache
from typing import Any

from app.core.knowledge.queries import DEPTH, EXTENSIONS, QUERIES

Def = tuple[str, int, str, str]
Tags = tuple[tuple[Def, ...], tuple[tuple[str, int], ...]]
# (path, content key, (mtime_ns, size, inode), tags or None); key None: unreadable
Parsed = tuple[str, str | None, tuple[int, int, int], Tags | None]

MAX_PARSE_BYTES = 1 << 20  # bigger files are listed, not parsed (generated or minified)
MAX_PYGMENTS_BYTES = 256 << 10  # regex lexers are slow on big files
MAX_LINE = 160  # a definition's line is cut here
TAGS_VERSION = 2  # bump when the queries or the tuple layout change (keys the cache)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# words of the languages themselves: never a definition, so never a link
KEYWORDS = frozenset("""
and as assert async await break class continue def del elif else except finally for from
global if import in is lambda nonlocal not or pass raise return try while with yield None True
False self cls function const let var new this typeof instanceof void null undefined export
default extends super static public private protected interface implements package func type
struct map chan range defer interface string int bool byte float64 float32 int64 int32 uint
impl pub mut use mod crate enum trait where match loop fn usize isize u32 u64 i32 i64 f64 str
char long short double unsigned signed sizeof typedef union switch case goto extern inline
auto template typename namespace using virtual override final abstract throws throw catch
boolean instanceof synchronized transient volatile native end elsif unless begin module
rescue ensure then echo array isset unset foreach endif endforeach""".split())

# formats whose "definitions" would be noise: data, prose, markup, styles, locks
NOT_CODE = frozenset(
    ".txt .md .rst .json .jsonl .yaml .yml .toml .ini .cfg .conf .csv .tsv .xml .svg .html .htm "
    ".css .scss .less .lock .log .map .po .pot .sum .mod .in .out .diff .patch .tex .bib .sql "
    ".ipynb .gitignore .gitattributes .editorconfig .properties .env .pem .key .crt".split())


def language(path: str) -> str | None:
    """The tree-sitter grammar steer has a query for, or None."""
    return EXTENSIONS.get(os.path.splitext(path)[1].lower())


def content_key(path: str, data: bytes) -> str:
    """The cache key of a file's tags: its bytes, and what decides how they are read (the
    parser, from the name's ending; the tag version)."""
    h = hashlib.blake2b(data, digest_size=16)
    h.update(f"\0{TAGS_VERSION}\0{os.path.splitext(path)[1].lower()}".encode())
    return h.hexdigest()


def _line_text(data: bytes, at: int) -> str:
    """The line holding byte offset `at`, cut to MAX_LINE."""
    start = data.rfind(b"\n", 0, at) + 1
    end = data.find(b"\n", at)
    raw = data[start:end if end >= 0 else len(data)]
    text = raw.decode("utf-8", "replace").rstrip().expandtabs(4)
    return text if len(text) <= MAX_LINE else text[: MAX_LINE - 1] + "…"


@cache
def _query(lang: str) -> tuple[Any, Any]:
    from tree_sitter import Parser, Query
    from tree_sitter_language_pack import get_language

    grammar = get_language(lang)  # type: ignore[arg-type]
    return Parser(grammar), Query(grammar, QUERIES[lang])


def _uses(data: bytes) -> tuple[tuple[str, int], ...]:
    """The identifiers a file mentions and how often (code, comments and strings alike: a
    name mentioned is a name used, for ranking), without the short ones and keywords."""
    counts = Counter(_IDENT.findall(data.decode("utf-8", "replace")))
    intern = sys.intern  # one string per name across files (marshal keeps them interned)
    return tuple(sorted((intern(k), n) for k, n in counts.items()
                        if len(k) >= 3 and k not in KEYWORDS))


def _tree_sitter(lang: str, data: bytes) -> Tags:
    from tree_sitter import QueryCursor

    parser, query = _query(lang)
    tree = parser.parse(data)
    cursor = QueryCursor(query)
    cursor.set_max_start_depth(DEPTH.get(lang, 6))
    captures = cursor.captures(tree.root_node)
    defs: dict[tuple[int, str], Def] = {}
    for cap, nodes in captures.items():
        kind = cap.partition(".")[2]
        for n in nodes:
            if not n.text:
                continue
            row = n.start_point[0]
            name = sys.intern(n.text.decode("utf-8", "replace"))
            if (row, name) not in defs:
                defs[(row, name)] = (name, row + 1, kind, _line_text(data, n.start_byte))
    return tuple(defs[k] for k in sorted(defs)), _uses(data)


@lru_cache(maxsize=256)
def _lexer(ext: str) -> Any:
    from pygments.lexers import get_lexer_for_filename
    from pygments.util import ClassNotFound

    try:
        return get_lexer_for_filename(f"x{ext}", stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None


def _pygments(lexer: Any, data: bytes) -> Tags:
    from pygments.token import Name

    text = data.decode("utf-8", "replace")
    lines = text.split("\n")
    defs: list[Def] = []
    refs: Counter[str] = Counter()
    row, pos = 0, 0
    for index, ttype, value in lexer.get_tokens_unprocessed(text):
        if ttype not in Name:
            continue
        row += text.count("\n", pos, index)
        pos = index
        if ttype in Name.Function or ttype in Name.Class:
            kind = "class" if ttype in Name.Class else "function"
            line = lines[row].rstrip().expandtabs(4) if row < len(lines) else ""
            defs.append((value, row + 1, kind, line if len(line) <= MAX_LINE else line[:MAX_LINE - 1] + "…"))
        elif ttype not in Name.Builtin and value.isidentifier():
            refs[value] += 1
    return tuple(defs), tuple(sorted(refs.items()))


def extract(path: str, data: bytes) -> Tags | None:
    """The file's tags, or None for what the map lists by path only (binary, too big, not
    code, no parser)."""
    if len(data) > MAX_PARSE_BYTES or b"\0" in data[:8192]:
        return None
    lang = language(path)
    if lang is not None:
        return _tree_sitter(lang, data)
    ext = os.path.splitext(path)[1].lower()
    if not ext or ext in NOT_CODE or len(data) > MAX_PYGMENTS_BYTES:
        return None
    lexer = _lexer(ext)
    return _pygments(lexer, data) if lexer is not None else None


def read_file(root: str, rel: str) -> tuple[bytes, tuple[int, int, int]] | None:
    """A regular file's bytes and its stat key, not following a symlink (a link's target is
    listed under its own name when it is in the tree); None when it is not a readable file."""
    try:
        fd = os.open(os.path.join(root, rel), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_PARSE_BYTES * 4:
            return (b"", (st.st_mtime_ns, st.st_size, st.st_ino)) if stat.S_ISREG(st.st_mode) else None
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks), (st.st_mtime_ns, st.st_size, st.st_ino)
    except OSError:
        return None
    finally:
        os.close(fd)


def read_and_extract(root: str, rels: list[str], known: frozenset[str] = frozenset()) -> list[Parsed]:
    """Read and tag each file (a worker process runs this on a slice of the tree). A file
    whose content key is in `known` (the cache has it) is not parsed again: its tags come
    back as None with the key, and the caller takes them from the cache."""
    out: list[Parsed] = []
    for rel in rels:
        got = read_file(root, rel)
        if got is None:
            out.append((rel, None, (0, 0, 0), None))
            continue
        data, st = got
        if st[1] > MAX_PARSE_BYTES:  # listed only; the key names the size, not the bytes
            out.append((rel, f"big:{st[1]}", st, None))
            continue
        key = content_key(rel, data)
        if key in known:
            out.append((rel, key, st, None))
            continue
        try:
            tags = extract(rel, data)
        except Exception:  # a grammar or lexer failing on odd input: the file is listed only
            tags = None
        out.append((rel, key, st, tags))
    return out
