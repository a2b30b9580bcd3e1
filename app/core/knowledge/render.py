"""The map as text for a model: ranked files with their definitions (`line: text`), then the
other files counted by folder, within a token budget.

A file name that is not plain text is written as it is carried (app/core/text/names.py).

The same index, instruction, context and budget always give the same bytes: every order has
a tie-break by path, ranks are rounded before they are compared, and nothing in the text
depends on time, on the build's progress or on a version number. So a later request can send
the same map again and a model's prefix cache still matches; what changed is sent as a new
item instead (delta.py), never by editing one already sent.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from app.core.knowledge.index import Index, folder
from app.core.knowledge.rank import Ranking
from app.core.text.names import carried
from app.core.text.plural import plural
from app.core.text.tokens import estimate_tokens

DEFAULT_BUDGET = 1500  # tokens; the embedded 8k-window model is given less by its caller
FOLDER_SHARE = 0.3  # at most this much of the budget goes to the folder summary
MAX_DEFS = (20, 8, 5)  # definitions shown per file: named, context, the rest
NAMED_IN_FULL = 3  # named files shown with up to MAX_DEFS[0] definitions

HEADER = ("Repository map: the files most relevant to this request, each with its definitions "
          "(line: text), then the other files by folder.\n")
HEADER_PATHS = ("Repository map (file names only; steer is still reading the definitions): the "
                "files most relevant to this request, then the other files by folder.\n")



@dataclass(frozen=True)
class RepoMap:
    """One rendering of the map. `complete` is False while only paths are known."""

    text: str
    tokens: int
    version: int  # the index version it was rendered from (delta.py counts from it)
    complete: bool
    files: tuple[str, ...]  # the files listed by name, in the order shown
    total_files: int


def file_block(index: Index, path: str, limit: int, named: Collection[str] = (),
               hidden: Sequence[str] = ()) -> str:
    """`path` and its definitions (at most `limit`: the named ones, then the most used)."""
    tags = index.tags(path)
    if not tags or not tags[0] or limit <= 0:
        return carried(path) + "\n"
    defs = [d for d in tags[0] if not any(h in d[3] for h in hidden)]
    shown = defs
    if len(defs) > limit:
        users = index.users
        best = sorted(defs, key=lambda d: (d[0] not in named, d[3][:1].isspace(),
                                           d[0].startswith("__"), d[0].startswith("_"),
                                           -users.get(d[0], 0), d[1], d[0]))
        shown = sorted(best[:limit], key=lambda d: (d[1], d[0]))
    lines = [carried(path) + ":"]
    lines.extend(f"{d[1]}: {d[3]}" for d in shown)
    if len(defs) > len(shown):
        lines.append(f"… {len(defs) - len(shown)} more definitions")
    return "\n".join(lines) + "\n"


def folder_summary(index: Index, shown: Iterable[str], budget: int) -> str:
    """The files not shown, counted by folder (two levels deep, else one), within `budget`."""
    left = dict(index.folders)
    for p in shown:
        d = folder(p)
        if left.get(d):
            left[d] -= 1
    for depth in (2, 1):
        counts: dict[str, int] = {}
        for d, n in left.items():
            if n:
                key = "/".join(d.split("/")[:depth]) if d else ""
                counts[key] = counts.get(key, 0) + n
        if not counts:
            return ""
        lines = [f"{carried(k) + '/' if k else '(top level)'} {n} file{'s' if n != 1 else ''}"
                 for k, n in sorted(counts.items())]
        text = "Other files by folder:\n" + "\n".join(lines) + "\n"
        if estimate_tokens(text) <= budget or depth == 1:
            break
    out = ["Other files by folder:"]
    used = estimate_tokens(out[0]) + 1
    items = sorted(counts.items())
    for i, line in enumerate(lines):
        tail = sum(n for _, n in items[i + 1:])
        more = f"… {len(items) - i - 1} more folders, {tail} files" if i + 1 < len(items) else ""
        cost = estimate_tokens(line + "\n") + (estimate_tokens(more + "\n") if more else 0)
        if used + cost > budget:
            rest = sum(n for _, n in items[i:])
            note = f"… {len(items) - i} more folders, {rest} files"
            if used + estimate_tokens(note + "\n") <= budget:
                out.append(note)
            break
        out.append(line)
        used += estimate_tokens(line + "\n")
    return "\n".join(out) + "\n" if len(out) > 1 else ""


def _fill(blocks: Iterable[tuple[str, str]], budget: int) -> tuple[list[str], list[str], int]:
    """Blocks in order while they fit; a block too big is tried once as its path alone."""
    texts: list[str] = []
    paths: list[str] = []
    used = 0
    for path, block in blocks:
        cost = estimate_tokens(block)
        if used + cost > budget:
            block = carried(path) + "\n"
            cost = estimate_tokens(block)
            if used + cost > budget:
                break
        texts.append(block)
        paths.append(path)
        used += cost
    return texts, paths, used


def render(index: Index, ranking: Ranking, budget: int = DEFAULT_BUDGET, *, version: int = 0,
           omit: Collection[str] = (), hidden: Sequence[str] = ()) -> RepoMap:
    """The full map for `ranking` within `budget` tokens. `omit`: files the request already
    carries whole. `hidden`: strings (key values) no line of the map may contain."""
    skip = set(omit)
    tiers = ((ranking.first, MAX_DEFS[0]), (ranking.then, MAX_DEFS[1]))

    def blocks() -> Iterable[tuple[str, str]]:
        done = set(skip)
        for group, limit in tiers:
            for i, p in enumerate(group):
                if p not in done:
                    done.add(p)
                    # past the first few named files (a name many files define), each shows
                    # its named definitions and a few more, so more of them fit
                    cap = limit if i < NAMED_IN_FULL else MAX_DEFS[1]
                    yield p, file_block(index, p, cap, ranking.named_words, hidden)
        for p in ranking.rest(done):
            yield p, file_block(index, p, MAX_DEFS[2], ranking.named_words, hidden)

    return _assemble(index, HEADER, blocks(), budget, version, True)


def render_paths(index: Index, order: Iterable[str], budget: int = DEFAULT_BUDGET, *,
                 version: int = 0, omit: Collection[str] = (),
                 found: Mapping[str, Sequence[tuple[int, str]]] | None = None) -> RepoMap:
    """The map while only paths are known: the files where a word search `found` the
    instruction's names defined, with those lines (word_search.py), then files in `order`
    by name, then folders."""
    skip = set(omit)
    found = {p: rows for p, rows in (found or {}).items() if p in index.files and p not in skip}

    def blocks() -> Iterable[tuple[str, str]]:
        for p, rows in found.items():
            yield p, carried(p) + ":\n" + "".join(f"{n}: {text}\n" for n, text in rows)
        for p in order:
            if p not in skip and p not in found:
                yield p, carried(p) + "\n"

    return _assemble(index, HEADER_PATHS, blocks(), budget, version, False)


def _assemble(index: Index, header: str, blocks: Iterable[tuple[str, str]], budget: int,
              version: int, complete: bool) -> RepoMap:
    budget = max(budget, 0)
    room = budget - estimate_tokens(header)
    if room <= 0 or not index.files:
        text = ""
        return RepoMap(text, estimate_tokens(text), version, complete, (), len(index.files))
    whole = folder_summary(index, (), room)
    reserve = min(estimate_tokens(whole), int(room * FOLDER_SHARE))
    texts, paths, used = _fill(blocks, room - reserve)
    summary = folder_summary(index, paths, room - used)
    text = header + "".join(texts) + summary
    return RepoMap(text, estimate_tokens(text), version, complete, tuple(paths), len(index.files))


@dataclass(frozen=True)
class MapStatus:
    """For the status line."""

    state: str  # "starting", "listing", "building", "ready", "failed"
    files: int
    done: int  # files read so far in the current build
    total: int
    version: int
    error: str | None = None

    @property
    def complete(self) -> bool:
        return self.state == "ready"

    def line(self) -> str:
        if self.state in ("starting", "listing"):
            return "map: listing files…"
        if self.state == "failed":
            return f"map: {plural(self.files, 'file')} · paths only ({self.error})"
        if self.state == "building":
            pct = int(100 * self.done / self.total) if self.total else 0
            return f"map: {plural(self.files, 'file')} · building {pct}%"
        return f"map: {plural(self.files, 'file')}"
