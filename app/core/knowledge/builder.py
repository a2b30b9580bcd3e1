"""The repository map, kept ready: built after launch in a thread of its own, kept current
from file-change events, cached on disk, and never waited for.

    builder = MapBuilder(root)          # nothing runs yet
    builder.start()                     # returns at once
    m = builder.current("fix parse_header", context=["pkg/cli.py"], budget=1500)
    m.text, m.tokens, m.complete        # complete=False: paths only, the first build is running
    builder.update({"pkg/cli.py"})      # the watcher's batch; returns at once
    builder.changes_since(m.version)    # what to append to the conversation instead of a new map
    builder.status().line()             # "map: 1,240 files · building 40%"
    builder.close()

`current` renders from the last published `Index` (immutable; swapped in by reference), so it
takes no lock and waits for nothing: before the first index with tags exists it answers with
the files' paths (git ls-files) ranked by the names in the instruction. The thread lists the
files, loads the cache (cache.py), parses what the cache lacks (first_build.py: in worker
processes, since the parser holds the GIL, see tags.py), publishes the full map, then serves `update` batches: it re-reads
only the named files, publishes the change in milliseconds and recomputes the global rank a
moment later, off the update path.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import queue
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from app.core.git.files import SKIP_DIRS, list_files
from app.core.git.repository import GitRepo
from app.core.knowledge.cache import Cached, TagCache, cache_dir
from app.core.knowledge.delta import ADDED, CHANGED, DELETED, MapDelta, net, render_delta
from app.core.knowledge.first_build import ONE_SHOT_IN_THREAD, estimate, parse, reuse, sizes
from app.core.knowledge.index import Entry, Index, Row
from app.core.knowledge.rank import PathIndex, rank
from app.core.knowledge.render import DEFAULT_BUDGET, MapStatus, RepoMap, render, render_paths
from app.core.knowledge.tags import (
    MAX_PARSE_BYTES,
    Parsed,
    Tags,
    content_key,
    extract,
    read_file,
)
from app.core.knowledge.tree_changes import differing, expand
from app.core.knowledge.word_search import WordSearch

HISTORY = 512  # versions whose changes `changes_since` can still name
RESCAN = "\0rescan"  # a queued update meaning "compare the whole tree"
WARM_CAP = 8.0  # seconds a one-shot run waits, at most, for a map its cache holds (settle)


@dataclass(frozen=True)
class _Published:
    version: int
    index: Index
    paths: PathIndex | None  # set while the index has no tags yet (paths only)
    complete: bool
    history: tuple[tuple[int, dict[str, str]], ...] = ()  # (version, its changes), oldest first
    forgotten: int = 0  # changes up to this version are no longer in `history`


@dataclass(frozen=True)
class _Ranked:
    """A global rank computed off the builder's thread, on `snapshot` (None: it failed)."""

    snapshot: Index
    rank: dict[str, float] | None
    rows: dict[str, Row] | None


class MapBuilder:
    def __init__(self, root: str | os.PathLike[str], *, cache: Path | None | bool = True,
                 workers: int | None = None, hidden: Sequence[str] = (),
                 rank_delay: float = 1.0, save_delay: float = 10.0, nice: int = 10,
                 lister: Callable[[Path], list[str]] | None = None,
                 one_shot: bool = False) -> None:
        """`cache`: True for the user's state dir, a folder, or False for none. `workers`:
        processes for a cold build (default: one per CPU, at most 4; 0: parse in this
        process, holding the GIL while each file parses). `hidden`: key values no
        line of the map may show. `lister`: the file list (default: git ls-files, or a walk
        outside a repository). `one_shot`: for a caller with no screen to keep responsive
        (`steer run`), which parses in this process whenever that is quicker."""
        self.root = Path(os.path.realpath(root))
        directory = cache_dir(self.root) if cache is True else (cache or None)
        self.cache = TagCache(directory) if isinstance(directory, Path) else None
        self.workers = workers if workers is not None else min(4, os.cpu_count() or 1)
        self.nice = nice  # the worker processes' CPU priority: below the app's
        self.hidden = tuple(h for h in hidden if h)
        self.rank_delay = rank_delay
        self.save_delay = save_delay
        self._lister = lister or list_files
        # where the instruction's names are defined, while only paths are known
        self.words = WordSearch(self.root, self.files, self.hidden)
        self._published = _Published(0, Index(), None, False)
        self._full_since = -1  # the first version with tags: deltas count from there
        self._state = "starting"
        self._done = self._total = 0
        self._error: str | None = None
        self._queue: queue.Queue[list[str] | _Ranked | None] = queue.Queue()
        self._cond = threading.Condition()
        self._pending = 0  # update batches queued and not yet applied
        self._ranking = False  # a global rank is due after the last update
        self._ready = threading.Event()
        self._listed = threading.Event()  # the file list is published (a map of paths)
        self._sorted = threading.Event()  # the first build knows what it must parse
        self.to_parse = 0  # files the first build must parse (the cache lacks their tags)
        self.parse_estimate = 0.0  # seconds that parse takes in one thread (`estimate`)
        self.one_shot = one_shot
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._known: dict[str, Tags | None] = {}  # content key -> tags, for updates
        self._git: GitRepo | None = None
        self._cache_dirty = False
        self._rank_stale = False  # the published rank is provisional and no rank is running
        self._last_save = 0.0
        self._saver: threading.Thread | None = None
        self._t0 = time.perf_counter()
        self.timings: dict[str, float] = {}  # seconds: list, cache_load, stat, parse, index,
        # total (launch -> complete map), ranked (launch -> first PageRank), last_update, ...
        self.parsed = 0  # files the first build read and parsed (not found in the cache)

    # -- the API the session, the UI and the tools call ----------------------------------
    def start(self) -> MapBuilder:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="steer-repomap", daemon=True)
            self._thread.start()
        return self

    def current(self, instruction: str = "", context: Iterable[str] = (),
                budget: int = DEFAULT_BUDGET, omit: Collection[str] = ()) -> RepoMap:
        """The freshest complete map for this request, at once (paths only while the first
        build runs). Same repository, same arguments: same bytes."""
        pub = self._published
        context = list(context)
        if pub.paths is not None or not pub.complete:
            order = pub.paths.order(instruction, context) if pub.paths else iter(())
            return render_paths(pub.index, order, budget, version=pub.version, omit=omit,
                                found=self.words.found(instruction))
        ranking = rank(pub.index, instruction, context)
        return render(pub.index, ranking, budget, version=pub.version, omit=omit,
                      hidden=self.hidden)

    def order(self, instruction: str = "", context: Iterable[str] = ()) -> Iterator[str]:
        """Every file in the order the map for this request shows them (paths only while
        the first build runs; nothing before the tree is listed)."""
        pub = self._published
        context = list(context)
        if pub.paths is not None or not pub.complete:
            return pub.paths.order(instruction, context) if pub.paths else iter(())
        ranking = rank(pub.index, instruction, context)
        head = [*ranking.first, *ranking.then]
        return itertools.chain(head, ranking.rest(set(head)))

    def changes_since(self, version: int, budget: int = DEFAULT_BUDGET) -> MapDelta | None:
        """The files added, changed or deleted since `version` (a map already sent), with
        their entries as they are now; None when a fresh map must be sent instead (that
        version was paths only, is too old to know, or the changes do not fit `budget`)."""
        pub = self._published
        if version < self._full_since or version < pub.forgotten or not pub.complete:
            return None
        changes = net(step for v, step in pub.history if v > version)
        return render_delta(pub.index, changes, since=version, version=pub.version,
                            budget=budget, hidden=self.hidden)

    def update(self, changed_paths: Iterable[str]) -> None:
        """Files that changed on disk (added, modified or deleted; workspace-relative or
        absolute). Returns at once; the builder re-reads them in its thread."""
        paths = [p for p in (self._relative(p) for p in changed_paths) if p]
        if paths:
            with self._cond:
                self._pending += 1
            self._queue.put(paths)

    def rescan(self) -> None:
        """Compare the whole tree with the map (git ls-files and a stat per file) and apply
        the difference: after a branch switch, a pull, or anything a watcher may miss.
        Returns at once."""
        with self._cond:
            self._pending += 1
        self._queue.put([RESCAN])

    def status(self) -> MapStatus:
        pub = self._published
        return MapStatus(self._state, len(pub.index.files), self._done, self._total,
                         pub.version, self._error)

    def files(self) -> list[str]:
        """The files the map knows (not ignored), sorted."""
        return sorted(self._published.index.files)

    def known(self) -> tuple[int, Collection[str]]:
        """(version, the files the map knows), at once and unsorted (for a lookup per key)."""
        pub = self._published
        return pub.version, pub.index.files.keys()

    def wait(self, timeout: float | None = None) -> bool:
        """Until the full map is published and every queued update applied (tests and
        benchmarks; a request never calls this)."""
        end = None if timeout is None else time.monotonic() + timeout
        if not self._ready.wait(timeout):
            return False
        left = None if end is None else max(0.0, end - time.monotonic())
        with self._cond:
            return self._cond.wait_for(lambda: self._pending <= 0 and not self._ranking, left)

    def look_ahead(self, instruction: str) -> None:
        """The words of an instruction about to be sent (a draft): while only paths are
        known, find where its names are defined (word_search.py), so that `current` can
        show them. Returns at once."""
        if not self._published.complete:
            self.words.look_ahead(instruction)

    def settle(self, timeout: float, instruction: str = "", cached: int = 30_000) -> bool:
        """For a one-shot caller (`steer run`): until the full map is published, at most
        `timeout` seconds, when it can come in that time: a tree whose files to parse (those
        the cache lacks) take at most what is left of `timeout` by `estimate`, and of at
        most `cached` files when the cache has them (measured here, warm: 2,450 files
        publish in about 0.5 s, 20,000 in 1.1 s). Otherwise, and meanwhile, the word search
        for `instruction`'s names (the paths-only map shows where they are defined). True
        when the full map is there."""
        end = time.monotonic() + timeout

        def left(until: float = 0.0) -> float:
            return max(0.0, (until or end) - time.monotonic())

        if instruction:
            self.words.look_ahead(instruction)  # beside the build, in case it is not in time
        if not self._listed.wait(timeout):
            return False
        warm = self.cache is not None and self.cache.path.exists()
        quick = not warm or self._total <= cached  # a large cached tree: its stat pass alone
        # A cached tree's load, stat pass and index are bounded work, waited for whole (up to
        # WARM_CAP) even on a busy machine, where they can take longer than `timeout`: the
        # second run on an unchanged tree always has its map. A parse is what `timeout` bounds.
        hard = max(end, time.monotonic() + WARM_CAP) if warm and quick else end
        if quick and self._sorted.wait(left(hard)) and self.parse_estimate <= left():
            self._ready.wait(left(hard) if not self.to_parse else left())
        if not self._published.complete and instruction:
            self.words.wait(instruction, left())
        return self._published.complete

    def wait_built(self, timeout: float | None = None) -> bool:
        """Until the first build has ended (a full map, or a failure)."""
        return self._ready.wait(timeout)

    def close(self) -> None:
        self._stop.set()
        self._queue.put(None)
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self._git is not None:
            self._git.close()

    def __enter__(self) -> MapBuilder:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the thread ----------------------------------------------------------------------
    def _publish(self, index: Index, *, paths: PathIndex | None = None, complete: bool,
                 changes: dict[str, str] | None = None) -> None:
        last = self._published
        version = last.version + 1
        history, forgotten = last.history, last.forgotten
        if changes:
            history = (*history, (version, changes))
            if len(history) > HISTORY:
                forgotten = history[-HISTORY - 1][0]
                history = history[-HISTORY:]
        self._published = _Published(version, index, paths, complete, history, forgotten)

    def _run(self) -> None:
        try:
            self._build()
        except Exception as exc:  # the map stays paths-only; steer works without it
            self._error = f"{type(exc).__name__}: {exc}"
            self._state = "failed"
            with self._cond:
                self._pending = 0
                self._ranking = False
                self._cond.notify_all()
            return
        finally:
            self._listed.set()
            self._sorted.set()
            self._ready.set()
        if not self._stop.is_set():
            # a one-shot caller's request must not share the GIL with a PageRank: the rank
            # its cache needs is computed when it closes (after the answer)
            self._serve(rank_due=None if self.one_shot else time.monotonic())

    def _build(self) -> None:
        t0 = time.perf_counter()
        self._state = "listing"
        self._git = GitRepo.open(self.root)
        paths = self._lister(self.root)
        t1 = time.perf_counter()
        self.timings["list"] = t1 - t0
        bare: dict[str, Entry] = {p: (None, (0, 0, 0), None) for p in paths}
        self._publish(Index.build(bare), paths=PathIndex(paths), complete=False)
        self._listed.set()
        self._total, self._state = len(paths), "building"
        cached = self.cache.load() if self.cache else Cached()
        t2 = time.perf_counter()
        self.timings["cache_load"] = t2 - t1
        entries, todo = reuse(str(self.root), paths, cached)
        sized = sizes(str(self.root), todo)
        hashed = {rel for rel in todo if cached.unsure.get(rel) in cached.tags}
        self.to_parse, self.parse_estimate = len(todo) - len(hashed), estimate(sized, hashed)
        self._sorted.set()
        self._done = len(entries)
        t3 = time.perf_counter()
        self.timings["stat"] = t3 - t2
        for rel, key, st, tags in self._parse(sized, frozenset(cached.tags)):
            if key is not None and key in cached.tags:
                tags = cached.tags[key]
            elif key is not None:
                self.parsed += 1
            entries[rel] = (key, st, tags)
        if self._stop.is_set():  # closed mid-build: nothing half-read is published; what was
            if self.cache is not None and entries:  # read is cached, so the next launch
                with contextlib.suppress(OSError):  # (a short `steer run`) goes on from it
                    self.cache.save(entries, {})
            return
        self._known = {e[0]: e[2] for e in entries.values() if e[0] is not None}
        t4 = time.perf_counter()
        self.timings["parse"] = t4 - t3
        index = Index.build(entries)
        tagged = {p for p, e in entries.items() if e[2] is not None}
        # Complete now: every file and definition, and the graph's rows, so a request ranks by
        # its names and context at once. The global order of the rest is the cache's PageRank
        # when nothing changed, else a one-step estimate until the rank thread's PageRank
        # replaces it (moments later: its rows are these).
        exact = not todo and set(cached.rank) == tagged
        index = index.with_rank(cached.rank if exact else index.provisional_rank(),
                                index.all_rows(), exact=True)  # no request makes a row
        self.timings["index"] = time.perf_counter() - t4
        self.timings["total"] = time.perf_counter() - t0
        self._full_since = self._published.version + 1
        self._publish(index, complete=True)
        self._state = "ready"
        self._t0 = t0
        self._cache_dirty = bool(todo) or set(cached.stats) != set(entries)
        self._last_save = time.monotonic()  # the first save waits for the PageRank (or close)
        self._rank_stale = not exact
        with self._cond:
            self._ranking = not self.one_shot  # _serve starts the rank thread at once

    def _parse(self, sized: list[tuple[int, str]], known: frozenset[str]) -> list[Parsed]:
        def progress(n: int) -> None:
            self._done += n

        here = self.one_shot and self.parse_estimate <= ONE_SHOT_IN_THREAD
        return parse(str(self.root), sized, known, workers=0 if here else self.workers,
                     progress=progress, stop=self._stop, nice=self.nice)

    def _serve(self, rank_due: float | None = None) -> None:
        ranker: threading.Thread | None = None
        while not self._stop.is_set():
            now = time.monotonic()
            dues = [d for d in (rank_due if ranker is None else None,
                                self._last_save + self.save_delay if self._cache_dirty else None)
                    if d is not None]
            timeout = max(0.0, min(dues) - now) if dues else None
            items: list[list[str] | _Ranked | None] = []
            try:
                items.append(self._queue.get(timeout=timeout))
            except queue.Empty:
                pass
            while True:  # take what queued meanwhile in the same go
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            if any(item is None for item in items):
                break
            batches = [item for item in items if isinstance(item, list)]
            paths = {p for b in batches for p in b}
            if paths:
                t = time.perf_counter()
                if self._apply(paths):
                    rank_due = time.monotonic() + self.rank_delay
                    self._cache_dirty = True
                self.timings["last_update"] = time.perf_counter() - t
            for item in items:
                if isinstance(item, _Ranked):
                    ranker = None
                    self._rank_stale = item.rank is None and self._rank_stale
                    if item.rank is not None and self._merge_rank(item):
                        rank_due = rank_due or time.monotonic() + self.rank_delay
            now = time.monotonic()
            if rank_due is not None and now >= rank_due and ranker is None:
                ranker = threading.Thread(target=self._rank, args=(self._published.index,),
                                          name="steer-repomap-rank", daemon=True)
                ranker.start()
                rank_due = None
            if self._cache_dirty and now >= self._last_save + self.save_delay:
                self._save()
            with self._cond:
                self._pending -= len(batches)
                self._ranking = rank_due is not None or ranker is not None
                self._cond.notify_all()
        if ranker is not None:
            ranker.join(timeout=30)
        elif self._rank_stale and self._cache_dirty and self._published.complete:
            self._rank_now()  # a one-shot caller's: the cache keeps the exact rank
        if self._cache_dirty:
            self._save(wait=True)
        elif self._saver is not None:
            self._saver.join()
        with self._cond:  # closed: nobody waits for what will not come
            self._pending, self._ranking = 0, False
            self._cond.notify_all()

    def _rank_now(self) -> None:
        try:
            rank, rows = self._published.index.global_rank()
        except Exception:  # noqa: BLE001 - the provisional order stays; the map stays usable
            return
        index = self._published.index
        self._publish(index.with_rank(rank, rows, exact=True), complete=True)
        self._rank_stale = False

    def _rank(self, snapshot: Index) -> None:
        """The global rank of `snapshot`, in a thread of its own (seconds on a large tree),
        so an update arriving meanwhile is applied at once. Its result comes back through
        the queue: one thread publishes."""
        t = time.perf_counter()
        try:
            rank, rows = snapshot.global_rank()
        except Exception:  # noqa: BLE001 - a rank that fails keeps the provisional order; the map stays usable
            self._queue.put(_Ranked(snapshot, None, None))
            return
        self.timings["last_rank"] = time.perf_counter() - t
        self.timings.setdefault("ranked", time.perf_counter() - self._t0)
        self._queue.put(_Ranked(snapshot, rank, rows))

    def _merge_rank(self, done: _Ranked) -> bool:
        """Publish a rank computed on an earlier index; True when files changed since (the
        rank is then due again)."""
        current = self._published.index
        assert done.rank is not None and done.rows is not None
        self._cache_dirty = self._cache_dirty or dict(done.rank) != dict(current.rank)
        if current.files is done.snapshot.files:
            self._publish(current.with_rank(done.rank, done.rows, exact=True), complete=True)
            return False
        old, now = done.snapshot.files, current.files
        rows = {p: r for p, r in done.rows.items() if now.get(p) is old.get(p)}
        self._publish(current.with_rank(done.rank, rows), complete=True)
        return True

    def _apply(self, paths: set[str]) -> bool:
        """Re-read `paths`, publish the change; False when nothing changed."""
        index = self._published.index
        root = str(self.root)
        if RESCAN in paths:
            paths = (paths - {RESCAN}) | differing(self.root, index, self._lister(self.root))
        paths = expand(self.root, paths, index)
        new = sorted(p for p in paths if p not in index.files)
        ignored = self._ignored(new) if new else set()
        updates: dict[str, Entry | None] = {}
        changes: dict[str, str] = {}
        for rel in sorted(paths):
            old = index.files.get(rel)
            got = read_file(root, rel) if rel not in ignored else None
            if got is None:
                if old is not None:
                    updates[rel], changes[rel] = None, DELETED
                continue
            data, st = got
            key = content_key(rel, data) if st[1] <= MAX_PARSE_BYTES else f"big:{st[1]}"
            if old is not None and old[0] == key:
                if old[1] != st:
                    updates[rel] = (key, st, old[2])  # touched, same content: new stat only
                continue
            if key in self._known or key.startswith("big:"):
                tags = self._known.get(key)
            else:
                try:
                    tags = extract(rel, data)
                except Exception:  # noqa: BLE001 - a grammar that chokes on one file lists it by path only
                    tags = None
                self._known[key] = tags
            updates[rel] = (key, st, tags)
            changes[rel] = CHANGED if old is not None else ADDED
        if not updates:
            return False
        self._publish(index.changed(updates), complete=True, changes=changes or None)
        return True

    def _ignored(self, paths: list[str]) -> set[str]:
        """New paths the file list would not hold: inside a git dir, ignored by git, or
        (outside a repository) in one of the folders the walk skips."""
        out = {p for p in paths if p.split("/")[0].lower() == ".git"}
        if self._git is None:
            return out | {p for p in paths if any(s in SKIP_DIRS for s in p.split("/")[:-1])}
        with contextlib.suppress(Exception):  # git could not say (locked, gone): listed, as before
            out |= self._git.ignored([p for p in paths if p not in out])
        return out

    def _save(self, *, wait: bool = False) -> None:
        """Write the cache from the published index, in a thread (a 50,000-file cache takes
        about a second; updates must not queue behind it)."""
        self._last_save = time.monotonic()
        self._cache_dirty = False
        if self.cache is None:
            return
        if self._saver is not None and self._saver.is_alive():
            if not wait:
                self._cache_dirty = True  # the next round writes what this one missed
                return
            self._saver.join()
        cache, index = self.cache, self._published.index

        def write() -> None:
            with contextlib.suppress(OSError):
                cache.save(index.files, index.rank)

        self._saver = threading.Thread(target=write, name="steer-repomap-save", daemon=True)
        self._saver.start()
        if wait:
            self._saver.join()

    def _relative(self, path: str) -> str | None:
        p = str(path)
        if os.path.isabs(p):
            try:
                p = os.path.relpath(p, self.root)
            except ValueError:
                return None
        p = p.replace(os.sep, "/").strip("/")
        if not p or p == "." or p.startswith("../") or p == "..":
            return None
        return p
