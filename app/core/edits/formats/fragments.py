"""Whole-file answers that are not whole: reading a "whole file" block as the model meant it.

Asked for the complete file, models often write less: a tiny one copies the first lines and
stops; a fast one elides what it did not change (`# ... existing code ...`, `// ...`). Read
literally, such a block proposes deleting everything it left out, so a newcomer's first
request on a 6-line file could propose deleting four of them. This module reads the block as
a careful reviewer would:

- lazy markers (a line such as `# ... existing code ...`, `// ... rest unchanged`, `...`
  that is not a line of the file) stand for the file's lines between what the answer shows:
  a marker never deletes anything;
- the text between markers (or the whole block) is fitted to the region of the file it
  matches best: equal lines match, a changed line (a new signature) matches the line it
  changes, other lines are added or dropped. A block that matches a region and leaves out
  what lies before or after it is a fragment: it replaces its region only, as if markers
  stood at its ends;
- except when that is ambiguous, and then the deletion stays, flagged: the instruction asked
  to remove something (the block may mean to drop the rest), or the lines the block ends
  with could as well replace the left-out edge (it is no larger than they are);
- a whole-file answer that deletes many more lines than it adds, unasked, is flagged too.
  Flagged hunks stay out of bulk accepts; a deliberate per-hunk accept takes them.

The result is plain lines for the whole file: the pending diff diffs them against the base
like any whole-file answer, and asks `warning` which of its hunks to flag.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

LARGE_DELETION = 5  # a whole-file answer dropping this many lines more than it adds is flagged
FIT_CELLS = 60_000  # base lines x block lines aligned exactly; past it, difflib's blocks

# a comment (or a bare ellipsis) that stands for code the answer left out
_ELLIPSIS = r"(\.\.\.|…)"
_WORDS = (r"(existing|unchanged|rest of|remaining|remainder|same as (before|above)|omitted|elided|"
          r"other (code|methods|functions|lines)|previous (code|lines))")
_COMMENT = r"(#+|//+|/\*+|<!--|--|;+|%+)"
LAZY = re.compile(
    rf"^\s*(?:{_ELLIPSIS}|{_COMMENT}\s*(?:.*{_ELLIPSIS}.*|.*\b{_WORDS}\b.*)(\*/|-->)?)\s*$",
    re.IGNORECASE)

# instructions that may mean a deletion (the only case a fragment's edges may be deleted)
REMOVAL = re.compile(
    r"\b(remov(e|es|ed|ing)|delet(e|es|ed|ing)|drop(s|ped|ping)?|strip(s|ped|ping)?|"
    r"eras(e|es|ed|ing)|cut(s|ting)?|trim(s|med|ming)?|get(ting)? rid|eliminat(e|es|ed|ing)|"
    r"clear(s|ed|ing)?|empty|empties|emptied|purg(e|es|ed|ing)|prun(e|es|ed|ing)|"
    r"clean(\s|-)?up|cleanup|shorten(s|ed|ing)?|shrink(s|ing)?|rewrit(e|es|ing|ten)|"
    r"replac(e|es|ed|ing)|mov(e|es|ed|ing)|extract(s|ed|ing)?|split(s|ting)?|dedup\w*|unused|"
    r"only keep|keep only|reduc(e|es|ed|ing)|simplif(y|ies|ied|ying)|refactor(s|ed|ing)?|"
    r"inlin(e|es|ed|ing)|collaps(e|es|ed|ing)|merg(e|es|ed|ing))\b", re.IGNORECASE)
_WORD = re.compile(r"\w+")


_QUOTED = re.compile(r"\"[^\"]*\"|`[^`]*`|'[^'\s][^']*'")


def asks_removal(instruction: str) -> bool:
    """The instruction's own words (not text it quotes) may mean deleting code."""
    return bool(REMOVAL.search(_QUOTED.sub(" ", instruction or "")))


def markers(lines: Sequence[str], base: set[str]) -> list[int]:
    """Positions of lazy markers: lines that look like one and are not lines of the file. A
    bare `...` under a line opening a block (`def f():`, `{`) is a stub body, not a marker."""
    out = []
    for j, t in enumerate(lines):
        if t in base or not LAZY.match(t):
            continue
        if t.strip() in ("...", "…") and j and lines[j - 1].rstrip().endswith((":", "{")):
            continue
        out.append(j)
    return out


@dataclass
class Reading:
    """What a whole-file block means for the file."""

    lines: list[str]
    note: str = ""  # how it was read, when not literally (shown on its hunks)
    # base line ranges [s, e) whose deletion may be a fragment's left-out part, with why: the
    # hunks touching them are flagged
    flags: list[tuple[int, int, str]] = field(default_factory=list)
    # lines of code (not blank) the file has more than the reading: a whole answer that is
    # much shorter than the file deletes code, however its diff splits into hunks
    lost: int = 0
    gone: frozenset[str] = frozenset()  # names the file defines that the reading never mentions


# a definition's name (Python, JS/TS, Go, Rust, C-like `class`/`struct`): a whole answer that
# drops it deleted the definition or renamed it unasked
_DEF = re.compile(r"^\s*(?:async\s+)?(?:def|class|function|func|fn|struct|interface|enum)\s+"
                  r"([A-Za-z_]\w*)")


@dataclass
class _Fit:
    start: int  # the region of the base the segment replaces
    end: int
    alike: int  # the segment's lines with words matched to a line of the region
    lead: int  # segment lines before its first matched line (after its last: trail)
    trail: int


def read_whole(base: Sequence[str], new: Sequence[str], *, removal_asked: bool = False) -> Reading:
    """The whole file the block `new` stands for, given the file `base` it replaces."""
    reading = _read_whole(list(base), list(new), removal_asked)
    reading.lost = _code(base) - _code(reading.lines)
    names = {m.group(1) for t in base if (m := _DEF.match(t))}
    if names:
        words = set(_WORD.findall("\n".join(reading.lines)))
        reading.gone = frozenset(names - words)
    return reading


def _code(lines: Sequence[str]) -> int:
    return sum(1 for t in lines if t.strip())


def _read_whole(base: list[str], new: list[str], removal_asked: bool) -> Reading:
    if not base or not new:
        # a new or empty file is written as given; an empty block is left alone upstream
        return Reading(new)
    marks = markers(new, set(base))
    segments: list[list[str]] = [[]]
    at = set(marks)
    for j, t in enumerate(new):
        if j in at:
            segments.append([])
        else:
            segments[-1].append(t)
    n = len(base)
    out: list[str] = []
    notes: list[str] = []
    flags: list[tuple[int, int, str]] = []
    if marks:
        notes.append(f"read {len(marks)} line{'s' if len(marks) != 1 else ''} like "
                     f"{new[marks[0]].strip()!r} as the file's lines "
                     f"{'they stand' if len(marks) != 1 else 'it stands'} for")
    pos, first, fit, kept = 0, None, None, False
    for k, seg in enumerate(segments):
        if not seg:
            continue
        after_marker = k > 0
        fit = _fit(base, seg, pos, late=after_marker and k == len(segments) - 1)
        region = _is_region(seg, fit)
        if not marks and not region:
            return Reading(list(new))  # not a region of the file: a rewrite, read literally
        head = base[pos:fit.start]
        if after_marker:
            out += head  # what the marker stands for
        elif _keep(head, fit.lead, removal_asked, region):
            out += head
            kept = kept or any(t.strip() for t in head)
        elif not _replaces(head, seg[: fit.lead], at_end=False):
            flags.append((pos, fit.start, _flag("first", fit.start - pos)))
        out += seg
        first = fit.start if first is None else first
        pos = fit.end
    tail = base[pos:]
    if marks and not segments[-1]:  # a marker at the end keeps the rest
        out += tail
    elif fit is not None and _keep(tail, fit.trail, removal_asked, _is_region(segments[-1], fit)):
        out += tail
        kept = kept or any(t.strip() for t in tail)
    elif fit is None or not _replaces(tail, segments[-1][len(segments[-1]) - fit.trail :],
                                      at_end=True):
        flags.append((pos, n, _flag("last", n - pos)))
    if kept and first is not None:
        notes.append(f"the answer showed lines {first + 1}–{max(first + 1, pos)} of {n} only: the "
                     "rest is kept")
    return Reading(out, "; ".join(notes), flags)


def warning(old: Sequence[str], new: Sequence[str], start: int, end: int,
            reading: Reading, removal_asked: bool) -> str:
    """Why a hunk of a whole-file answer must not go in with a bulk accept ("" when it may)."""
    if reading.flags:
        # the hunk at a flagged edge, or (a diff may place a deletion anywhere in a run of
        # equal lines) any hunk of the reading that removes more lines than it adds
        kept = set(new)
        if any(t not in kept for t in old):
            for s, e, why in reading.flags:
                if (start <= e and s <= end) or len(old) > len(new):
                    return why
    lost = _code(old) - _code(new)
    if not removal_asked and lost >= LARGE_DELETION:
        return (f"large deletion: {lost} lines more removed than added, and the instruction did "
                "not ask to remove anything")
    if not removal_asked and reading.lost >= LARGE_DELETION and lost > 0:
        # a rewrite several hunks wide: none deletes much, together they delete the code
        return (f"large deletion: the answer has {reading.lost} lines of code fewer than the "
                "file, and the instruction did not ask to remove anything")
    if not removal_asked and reading.gone:
        gone = [m.group(1) for t in old if (m := _DEF.match(t)) and m.group(1) in reading.gone]
        if gone:
            return (f"deletes {gone[0]}, which the answer never mentions again (deleted or "
                    "renamed), and the instruction did not ask to remove anything")
    return ""


# -- helpers -------------------------------------------------------------------------------------
def _is_region(seg: list[str], fit: _Fit) -> bool:
    """Most of the segment's lines with words in them matched lines of its region."""
    real = sum(1 for t in seg if _WORD.search(t))
    return real > 0 and fit.alike * 2 >= real


def _keep(edge: list[str], written: int, removal_asked: bool, region: bool) -> bool:
    """Keep a left-out edge of the file: the block matched a region, removal was not asked, and
    the edge is larger than the lines the block wrote at that end (else they may replace it)."""
    if not edge:
        return True
    if not any(t.strip() for t in edge):
        # blank lines only: models drop a file's trailing blank lines unasked, so they stay,
        # unless removing things was asked (then their deletion is proposed, flagged)
        return not removal_asked
    return region and not removal_asked and sum(1 for t in edge if t.strip()) > written


def _replaces(edge: list[str], written: list[str], at_end: bool) -> bool:
    """The lines the block wrote at a file's edge are the left-out edge's lines changed (a
    whole file whose last lines were edited), line for line: then they replace it."""
    e = [t.strip() for t in edge if t.strip()]
    w = [t.strip() for t in written if t.strip()]
    if not e or len(w) < len(e):
        return False
    w = w[len(w) - len(e) :] if at_end else w[: len(e)]
    return all(_alike(a, b) for a, b in zip(e, w, strict=True))


def _alike(a: str, b: str) -> bool:
    """Loosely the same line: a word of three letters or more in common, or most characters."""
    if {t for t in _WORD.findall(a) if len(t) > 2} & {t for t in _WORD.findall(b) if len(t) > 2}:
        return True
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio() >= 0.55


def _flag(which: str, n: int) -> str:
    return (f"deletes the file's {which} {n} line{'s' if n != 1 else ''}, which the answer may "
            "have left out (a fragment?)")


def _tokens(line: str) -> frozenset[str]:
    return frozenset(_WORD.findall(line))


def _similar(a: str, b: str, cache: dict) -> bool:
    """Two different lines are one line changed: the same words mostly, or nearly the same
    characters (short lines, punctuation)."""
    key = (a, b)
    hit = cache.get(key)
    if hit is None:
        sa, sb = a.strip(), b.strip()
        if not sa or not sb:
            hit = False
        elif sa == sb:
            hit = True
        else:
            ta, tb = _tokens(sa), _tokens(sb)
            if ta and tb and len(ta & tb) * 2 >= len(ta | tb):
                hit = True
            else:
                m = difflib.SequenceMatcher(None, sa, sb, autojunk=False)
                hit = m.real_quick_ratio() >= 0.75 and m.quick_ratio() >= 0.75 and m.ratio() >= 0.75
        cache[key] = hit
    return hit


def _fit(base: list[str], seg: list[str], lo: int, late: bool = False) -> _Fit:
    """The region base[start:end] (start >= lo) the segment stands for: the most lines equal
    to lines of the file, in order, over the shortest span (with repeated lines the copy
    nearest to the rest); then a changed first (last) line of the segment claims the line
    it changes just before (after) that span. `late`: a segment with no line of the file
    goes at the end (it follows a marker that stands for the rest), else at `lo`; of equally
    good regions it takes the last."""
    B = base[lo:]
    n, m = len(B), len(seg)
    if n * m > FIT_CELLS:
        fit = _fit_blocks(B, seg)
    else:
        fit = _fit_lcs(B, seg, late)
    if fit is None:
        at = n if late else 0
        return _Fit(lo + at, lo + at, 0, m, m)
    start, end, pairs = fit
    alike = sum(1 for j in pairs if _WORD.search(seg[j]))
    lead, trail = pairs[0], m - 1 - pairs[-1]
    cache: dict = {}
    if lead:  # the segment's first line may change the line before the span
        for p in range(start - 1, max(-1, start - lead - 2), -1):
            if _similar(B[p], seg[0], cache):
                start, alike, lead = p, alike + 1, 0
                break
    if trail:
        for q in range(end, min(n, end + trail + 1)):
            if _similar(B[q], seg[-1], cache):
                end, alike, trail = q + 1, alike + 1, 0
                break
    return _Fit(lo + start, lo + end, alike, lead, trail)


def _weight(line: str) -> int:
    """A line with a word in it anchors a region; a blank or `}` line barely does (it recurs
    everywhere, and must not stretch a region over lines the block left out)."""
    return 1000 if _WORD.search(line) else 1


def _fit_lcs(B: list[str], S: list[str], late: bool) -> tuple[int, int, list[int]] | None:
    """(start, end, matched segment indices) of a heaviest common subsequence of B and S
    (`_weight`) over the shortest span of B. None: nothing in common."""
    n, m = len(B), len(S)
    w = [_weight(t) for t in S]
    # prev[j], for the base prefix so far: (weight matched, latest start of the first match);
    # the shortest span ends at some i and starts at the latest start for B[:i]
    prev = [(0, -1)] * (m + 1)
    spans: list[tuple[int, int]] = []  # (weight, start) of B[:i] for every i
    for i in range(1, n + 1):
        b = B[i - 1]
        row = [(0, -1)] * (m + 1)
        for j in range(1, m + 1):
            best = max(prev[j], row[j - 1])
            if b == S[j - 1]:
                k, s = prev[j - 1]
                cand = (k + w[j - 1], s if k else i - 1)
                if cand > best:
                    best = cand
            row[j] = best
        prev = row
        spans.append(row[m])
    total = prev[m][0]
    if total == 0:
        return None
    # of equally short spans the first, or with `late` the last
    span, end, start = min((i + 1 - s, -(i + 1) if late else i + 1, s)
                           for i, (k, s) in enumerate(spans) if k == total)
    end = abs(end)
    sub = B[start:end]
    table = [[0] * (m + 1) for _ in range(len(sub) + 1)]
    for i in range(1, len(sub) + 1):
        b, cells, up = sub[i - 1], table[i], table[i - 1]
        for j in range(1, m + 1):
            score = max(up[j], cells[j - 1])
            if b == S[j - 1] and up[j - 1] + w[j - 1] > score:
                score = up[j - 1] + w[j - 1]
            cells[j] = score
    pairs: list[int] = []
    i, j = len(sub), m
    while i > 0 and j > 0:
        if sub[i - 1] == S[j - 1] and table[i][j] == table[i - 1][j - 1] + w[j - 1]:
            pairs.append(j - 1)
            i, j = i - 1, j - 1
        elif table[i - 1][j] == table[i][j]:
            i -= 1
        else:
            j -= 1
    pairs.reverse()
    return start, end, pairs


def _fit_blocks(B: list[str], S: list[str]) -> tuple[int, int, list[int]] | None:
    """For large inputs: the span of difflib's matching blocks."""
    blocks = [b for b in difflib.SequenceMatcher(None, B, S, autojunk=False)
              .get_matching_blocks() if b.size]
    if not blocks:
        return None
    pairs = [j for b in blocks for j in range(b.b, b.b + b.size)]
    return blocks[0].a, blocks[-1].a + blocks[-1].size, pairs
