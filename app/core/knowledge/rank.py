"""Which files a request should see first: those whose paths or definitions the instruction
names, then the files in the context and what they use, then the rest, each group in the
order of a PageRank personalised to the request.

The personalised rank is a forward push from the named and context files over the index's
graph (pagerank.push): its cost depends on their neighbourhood, not on the size of the tree,
so a request pays a few milliseconds however large the repository. Beyond the push's reach,
files keep the order of the global rank the builder computed in the background.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from app.core.knowledge.index import TOO_COMMON, Index
from app.core.knowledge.pagerank import push

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KINDS = r"(?:function|func|fn|def|method|class|struct|interface|trait|type|enum|module)"
_SAID_CODE = re.compile(r"`([A-Za-z_]\w*)`|\b([A-Za-z_]\w*)\(|\b" + _KINDS + r"\s+`?([A-Za-z_]\w*)"
                        r"|\b([A-Za-z_]\w*)`?\s+" + _KINDS + r"\b")
WEAK = 0.3  # a plain word's weight in the personalisation, against a name written as code
_PATHLIKE = re.compile(r"[\w.\-/]*[\w\-]\.[A-Za-z0-9]{1,8}\b|[\w.\-]+/[\w.\-/]*")
# words an instruction uses that say nothing about the code, even where a file defines them
STOPWORDS = frozenset("""
a an and are as at be but by can do does for from get has have how i if in into is it its make
me my new no not of on or our please set should so that the their then this to up use we what
when where which while who why will with you your add fix change update remove delete rename
move write read test tests code file files function functions class method return value values
line lines name names type types error errors bug call calls run list main one two all any each
also just like need want more less same other""".split())
EXTRA_BEYOND = 0.1  # the global rank's share in the personalised order (its "teleport")


def words(text: str) -> list[str]:
    """Identifiers in `text`, first occurrence order."""
    return list(dict.fromkeys(_WORD.findall(text)))


def code_like(word: str) -> bool:
    return "_" in word.strip("_") or any(c.isdigit() for c in word) or \
        (word != word.lower() and word != word.upper() and not word.istitle())


def named_paths(text: str, basenames: Mapping[str, Sequence[str]]) -> list[str]:
    """The files `text` names: by path (`pkg/cli.py`), path end (`cli/main.py`) or file name
    (`cli.py`). `basenames`: file name -> the paths with that name."""
    hits = set()
    for token in {t.strip("./") for t in _PATHLIKE.findall(text)}:
        if not token:
            continue
        for p in basenames.get(token.rpartition("/")[2], ()):
            if "/" not in token or p == token or p.endswith("/" + token):
                hits.add(p)
    return sorted(hits)


def said_as_code(text: str) -> set[str]:
    """Words the instruction marks as code: `in backticks`, called(), or next to "function",
    "method", "class"... ("the tokenize function", "class Parser")."""
    said: set[str] = set()
    for m in _SAID_CODE.finditer(text):
        tick, call, before, after = m.groups()
        said.update(w for w in (before, after) if w and w.lower() not in STOPWORDS)
        said.update(w for w in (tick, call) if w)
    return said


def named_definers(index: Index, text: str) -> tuple[dict[str, float], dict[str, float]]:
    """Files defining an identifier the instruction names, weighted (a name defined in few
    files weighs more): `strong` for names written as code (snake_case, camelCase, in
    backticks, called, next to "function"), `weak` for a plain word that happens to be a
    name somewhere ("handle", "timeout"): it steers the order, it does not come first."""
    said = said_as_code(text)
    strong: dict[str, float] = {}
    weak: dict[str, float] = {}
    for word in words(text):
        found = index.definers.get(word)
        if not found or len(found) > TOO_COMMON:
            continue
        if code_like(word) or word in said:
            target = strong
        elif word.lower() in STOPWORDS or len(word) < 3:
            continue
        else:
            target = weak
        for p in found:
            target[p] = target.get(p, 0.0) + 1.0 / len(found)
    return strong, weak


@dataclass(frozen=True)
class Ranking:
    """Files in the order the map shows them: `first` (named), `then` (context and what it
    uses), and the rest from `rest()`."""

    first: tuple[str, ...]
    then: tuple[str, ...]
    scores: dict[str, float]
    index: Index
    named_words: frozenset[str]

    def rest(self, skip: set[str]) -> Iterator[str]:
        reached = sorted((p for p in self.scores if p not in skip), key=self._key)
        seen = set(skip)
        for p in reached:
            seen.add(p)
            yield p
        for p in self.index.order:
            if p not in seen and p in self.index.files:
                yield p
        for p in sorted(self.index.files):  # tagged files the global rank has not seen yet
            if p not in seen and p not in self.index.rank and self.index.files[p][2] is not None:
                yield p

    def _key(self, p: str) -> tuple[float, str]:
        return (-round(self.scores.get(p, 0.0) + EXTRA_BEYOND * self.index.rank.get(p, 0.0), 12), p)

    def ordered(self, group: Iterable[str]) -> tuple[str, ...]:
        return tuple(sorted(group, key=self._key))


def rank(index: Index, instruction: str, context: Iterable[str] = ()) -> Ranking:
    context = [p for p in dict.fromkeys(context) if p in index.files]
    by_path = named_paths(instruction, index.basenames)
    by_name, by_word = named_definers(index, instruction)
    seeds: dict[str, float] = {}
    for p in by_path:
        seeds[p] = seeds.get(p, 0.0) + 1.0
    for p, w in by_name.items():
        seeds[p] = seeds.get(p, 0.0) + w
    for p, w in by_word.items():
        seeds[p] = seeds.get(p, 0.0) + WEAK * w
    for p in context:
        seeds[p] = seeds.get(p, 0.0) + 0.5
    total = sum(seeds.values())
    scores = push({p: seeds[p] / total for p in sorted(seeds)}, index.out) if total else {}
    first = set(by_path) | set(by_name)
    then = set(context)
    for p in context:
        then.update(t for t, _ in index.out(p))
    then -= first
    named = frozenset(w for w in words(instruction)
                      if w in index.definers and w.lower() not in STOPWORDS)
    r = Ranking((), (), scores, index, named)
    return Ranking(r.ordered(first), r.ordered(then), scores, index, r.named_words)


_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


def parts(text: str) -> set[str]:
    """Lower-case word parts of names and paths: `load_invoice_record`, `InvoiceRecord` and
    `invoice/record.py` share `invoice` and `record`."""
    return {m.lower() for m in _PART.findall(text) if len(m) >= 3}


class PathIndex:
    """The paths-only ranking while the first build reads the files: each path's word parts,
    inverted, so a request scores only the paths sharing a part with its instruction."""

    def __init__(self, paths: Iterable[str]) -> None:
        self.paths = sorted(paths, key=lambda p: (p.count("/"), p))
        self.files = frozenset(self.paths)
        self.by_part: dict[str, list[str]] = {}
        self.basenames: dict[str, list[str]] = {}
        for p in self.paths:
            self.basenames.setdefault(p.rpartition("/")[2], []).append(p)
            for part in parts(p):
                self.by_part.setdefault(part, []).append(p)

    def order(self, instruction: str, context: Iterable[str] = ()) -> Iterator[str]:
        """Named paths, then context files, then paths sharing word parts with the instruction
        (most shared first), then the rest, shallow first."""
        named = named_paths(instruction, self.basenames)
        wanted = {w for w in parts(instruction) if w not in STOPWORDS}
        score: dict[str, int] = {}
        for w in sorted(wanted):
            for p in self.by_part.get(w, ()):
                score[p] = score.get(p, 0) + 1
        seen: set[str] = set()
        groups = (named, [p for p in context if p in self.files],
                  sorted(score, key=lambda p: (-score[p], p.count("/"), p)), self.paths)
        for group in groups:
            for p in group:
                if p not in seen:
                    seen.add(p)
                    yield p
