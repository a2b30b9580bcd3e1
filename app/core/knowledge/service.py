"""What a session takes from the knowledge room: the map items of a request, the files an
instruction names, the look-ups a model makes, and the status line's map state.

A front-end (the app, `steer run`) makes one `Knowledge` per workspace and starts it after
launch: the map builds in its own thread (builder.py), fed by the watcher's events through
`saw`. Nothing here waits for the build: a request takes what is published.

The map keeps the conversation append-only (DESIGN rule 10). A new change set's first
request carries the map for its instruction as an item of its own, before the instruction.
A later request of the same conversation sends nothing more when the repository did not
change (the earlier item stays, same bytes), else a new item at the end: what changed since
(delta.py), or a whole new map when the earlier one was paths only or the change is too big.

Look-ups (`answer`): each call runs in a thread against the working tree (lookup.py), its
card goes on the turn (a ToolCall of kind "lookup", the conversation's one-line card), and
its tokens count against the turn's `tool_tokens`; past that, or past `tool_rounds` rounds,
the model is told to answer with what it has. Each has `lookup_seconds`: one still running
then is answered "timed out" (and stops itself: lookup.py), one that raised is answered that
it failed, so no call is left unanswered and the turn goes on; Esc stops it with the turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import re
import weakref
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from app.core.disk.snapshot import Snapshot
from app.core.events import LookupCall, ToolCall, ToolRound, ToolsRefused
from app.core.knowledge import tools
from app.core.knowledge.builder import MapBuilder
from app.core.knowledge.lookup import Deadline, Lookup
from app.core.knowledge.render import MapStatus
from app.core.knowledge.secret_files import secret_name
from app.core.provider import Provider
from app.core.text.names import wire

TINY_MAP = 600  # map tokens for a tiny model (the embedded 135M one, 8k window)
WINDOW_SHARE = 8  # at most 1/8 of a known context window goes to the map
NAMED_MAX = 4  # files an instruction can bring along by naming them
NAMED_BYTES = 64_000  # a bigger named file is left to the map and the look-ups
# a back-end that cannot look files up is shown the top-ranked files whole instead (attach)
ATTACH_MAX = 8
ATTACH_SHARE = 4  # at most 1/4 of its context window, less what the request shows already
ATTACH_WINDOW = 8_192  # the window assumed when the back-end does not say
ATTACH_SCAN = 200  # ranked files looked at (most are sized once and skipped at most)
BYTES_PER_TOKEN = 4
_WORD = re.compile(r"[\w][\w./+-]*")


class Host(Protocol):
    """What `answer` needs of the turn a look-up belongs to (app/core/conversation/turn.py)."""

    tools: dict[str, ToolCall]
    size: int
    state: Any
    lookups: list[dict]  # the rounds' items, as sent
    lookup_chars: int  # the answer text those items hold


@dataclass
class _Spent:
    tokens: int = 0
    calls: int = 0


@dataclass(frozen=True)
class Policy:
    map_tokens: int = 1500
    tools: bool = True
    tool_rounds: int = 6  # look-up rounds per turn
    tool_tokens: int = 16_000  # tokens of look-up answers per turn
    # one look-up's time: a grep stops itself at it (lookup.py); any look-up still running
    # `lookup_grace` later is answered "timed out" all the same, and the turn goes on
    lookup_seconds: float = 5.0
    lookup_grace: float = 1.0


class Knowledge:
    def __init__(self, root: str | os.PathLike[str], policy: Policy = Policy(), *,
                 key_values: Sequence[str] = (), cache: Path | None | bool = True,
                 nice: int = 10, workers: int | None = None,
                 lister: Callable[[Path], list[str]] | None = None,
                 one_shot: bool = False) -> None:
        """`one_shot`: for `steer run` (builder.py: no screen to keep responsive)."""
        keys = tuple(k for k in key_values if k)
        self.policy = policy
        self.builder = MapBuilder(root, cache=cache, nice=nice, workers=workers, hidden=keys,
                                  lister=lister, one_shot=one_shot)
        self.lookup = Lookup(self.builder.root, key_values=keys, files=self._files)
        self.dropped: set[str] = set()  # named files the user took out of the next request
        self._spent: weakref.WeakKeyDictionary[Any, _Spent] = weakref.WeakKeyDictionary()
        self._names: tuple[int, dict[str, list[str]]] = (-1, {})

    def start(self) -> Knowledge:
        self.builder.start()
        return self

    def close(self) -> None:
        self.builder.close()
        self.lookup.close()

    def _files(self) -> list[str]:
        return self.builder.files()

    # -- the watcher -----------------------------------------------------------------------
    def saw(self, paths: Iterable[str], git_changed: bool = False) -> None:
        """Files changed on disk (a watcher batch); `git_changed`: HEAD or the index moved
        (a checkout may have changed anything: the builder compares the whole tree)."""
        self.builder.update(paths)
        if git_changed:
            self.builder.rescan()

    def saw_update(self, update: Any) -> None:
        """A LiveTree update (app/core/git/sync.py SyncUpdate: `paths`, `git_changed`)."""
        self.saw(update.paths, update.git_changed)

    # -- the map in a request --------------------------------------------------------------
    def budget(self, provider: Provider) -> int:
        """Map tokens for this back-end's model (within its context window)."""
        return self._budget(provider.context_window, provider.capabilities.model_class == "tiny")

    def _budget(self, window: int | None, tiny: bool) -> int:
        n = self.policy.map_tokens
        if tiny:
            n = min(n, TINY_MAP)
        if window:
            n = min(n, window // WINDOW_SHARE)
        return max(0, n)

    def opening(self, instruction: str, context: Sequence[str], window: int | None,
                tiny: bool) -> tuple[list[str], int | None]:
        """The map items of a new conversation, and the version they show (None: no map)."""
        budget = self._budget(window, tiny)
        if budget <= 0:
            return [], None
        m = self.builder.current(instruction, context, budget, omit=context)
        if not m.files:  # every file is in the request already: a map would say nothing
            return [], None
        return [m.text], (m.version if m.complete else -m.version)

    def items(self, fresh: bool, sent: int | None, instruction: str, bases: Sequence[Snapshot],
              provider: Provider) -> tuple[list[str], int | None]:
        """The map items of a request (none for an agent, which looks itself): `fresh`, a
        new conversation's; else what to append after the map of version `sent`. With the
        version the conversation then holds."""
        self.dropped.clear()  # the next instruction names its own files
        if provider.capabilities.agent:
            return [], None
        window, tiny = provider.context_window, provider.capabilities.model_class == "tiny"
        context = [s.path for s in bases]
        if fresh:
            return self.opening(instruction, context, window, tiny)
        return self.update(sent, instruction, context, window, tiny)

    def update(self, sent: int | None, instruction: str, context: Sequence[str],
               window: int | None, tiny: bool) -> tuple[list[str], int | None]:
        """The items a later request of the conversation appends, after a map of version
        `sent` (negative: that map was paths only): nothing when nothing changed, what
        changed, or a whole new map."""
        if sent is None:
            return [], None
        budget = self._budget(window, tiny)
        pub = self.builder.status()
        if sent < 0:  # paths only: the full map once it is there
            if not pub.complete:
                return [], sent
            return self.opening(instruction, context, window, tiny)
        delta = self.builder.changes_since(sent, budget)
        if delta is None:
            return self.opening(instruction, context, window, tiny)
        return ([delta.text] if delta.text else []), delta.version

    def status(self) -> MapStatus:
        return self.builder.status()

    def line(self) -> str:
        """"map: 1,240 files · building 40%" (and whether the model may look files up)."""
        return self.builder.status().line() + ("" if self.policy.tools else " · look-ups off")

    # -- files the instruction names -------------------------------------------------------
    def named(self, instruction: str, context: Collection[str] = ()) -> list[str]:
        """Files `instruction` names: a path of the tree, or a file name only one file has
        (not secret-looking, not too big, not in `context` already, not dropped). While the
        map has paths only, where the names it writes as code are defined is looked up
        meanwhile (builder.look_ahead)."""
        self.builder.look_ahead(instruction)
        version, known = self.builder.known()
        if not known:
            return []
        if self._names[0] != version:  # file name -> paths, once per version of the map
            by_name: dict[str, list[str]] = {}
            for p in known:
                by_name.setdefault(p.rpartition("/")[2], []).append(p)
            self._names = (version, by_name)
        by_name = self._names[1]
        out: list[str] = []
        for word in _WORD.findall(instruction):
            word = word.rstrip(".,;:!?)'\"`").removeprefix("./")
            if "." not in word and "/" not in word:
                continue
            if word in known:
                hit = word
            elif "/" not in word:
                same = by_name.get(word, [])
                if len(same) != 1:
                    continue
                hit = same[0]
            else:
                continue
            if hit in context or hit in out or hit in self.dropped or secret_name(hit):
                continue
            with contextlib.suppress(OSError):
                if os.path.getsize(self.builder.root / hit) <= NAMED_BYTES:
                    out.append(hit)
            if len(out) >= NAMED_MAX:
                break
        return out

    def blind(self, provider: Provider) -> bool:
        """Whether this back-end's model answers without look-ups (it cannot call tools, or
        they are off): it then sees only what the request holds (attach)."""
        caps = provider.capabilities
        # a server that refused `tools` once is asked without them since (openai_chat.py)
        refused = not getattr(provider, "offers_tools", True)
        return not caps.agent and not (caps.tools and self.policy.tools and not refused)

    def attach(self, instruction: str, context: Collection[str], window: int | None,
               shown_bytes: int = 0) -> list[str]:
        """For a model without look-ups: the top-ranked files for `instruction` (the map's
        order) whose whole text fits in a share of its window, after the `shown_bytes` the
        request holds already. In a tiny repository, every file; never a file in `context`,
        dropped by the user, secret-looking or empty."""
        left = (window or ATTACH_WINDOW) // ATTACH_SHARE * BYTES_PER_TOKEN - shown_bytes
        out: list[str] = []
        for path in itertools.islice(self.builder.order(instruction, context), ATTACH_SCAN):
            if len(out) >= ATTACH_MAX or left <= 0:
                break
            if path in context or path in self.dropped or secret_name(path):
                continue
            try:
                size = os.path.getsize(self.builder.root / path)
            except OSError:
                continue
            if 0 < size <= left:
                out.append(path)
                left -= size
        return out

    def drop(self, path: str) -> None:
        """The user took a named file out of the next request (one key)."""
        self.dropped.add(path)

    # -- look-ups --------------------------------------------------------------------------
    def offer(self) -> tuple[list[dict[str, Any]] | None, int]:
        """The tools a request offers, and the rounds allowed (None: none offered)."""
        if not self.policy.tools:
            return None, 0
        return tools.SPECS, self.policy.tool_rounds

    def handle(self, turn: Host, ev: LookupCall | ToolRound | ToolsRefused,
               user_added: Sequence[str]) -> None:
        """A look-up event of `turn`'s answer (the session's stream loop calls this)."""
        spent = self._spent.setdefault(turn, _Spent())
        if turn.state == "connecting":
            turn.state = "streaming"  # the model answered, with a look-up
        if type(ev) is LookupCall:
            task = asyncio.get_running_loop().create_task(self._answer(turn, ev, spent,
                                                                       tuple(user_added)))
            ev.reply.add_done_callback(lambda _f: task.cancel())  # the answer was cut: stop too
        elif type(ev) is ToolRound:  # the conversation keeps its items (Turn.lookups)
            turn.lookups.extend(ev.items)
            turn.lookup_chars = turn.size
        elif type(ev) is ToolsRefused:
            turn.tools["tools-refused"] = ToolCall("tools-refused", ev.message, "steer", "failed")

    async def _answer(self, turn: Host, ev: LookupCall, spent: _Spent,
                      user_added: tuple[str, ...]) -> None:
        spent.calls += 1
        cid = ev.id or f"lookup-{spent.calls}"
        if spent.tokens >= self.policy.tool_tokens:
            text = (f"look-up refused: this turn's look-ups have used their "
                    f"{self.policy.tool_tokens:,} tokens; answer with what you have.")
            turn.tools[cid] = ToolCall(cid, f"{ev.name} · refused: the turn's look-up budget "
                                       "is spent", "lookup", "failed")
        else:
            turn.tools[cid] = ToolCall(cid, f"{ev.name} …", "lookup", "in_progress")
            try:
                done = await self._run(ev, user_added)
            except asyncio.CancelledError:  # the turn was stopped: so was the look-up
                turn.tools[cid] = ToolCall(cid, f"{ev.name} · stopped with the turn", "lookup",
                                           "failed")
                raise
            spent.tokens += done.tokens
            text = wire(done.text)  # a name quoted raw in a refusal: escaped (text/names.py)
            turn.tools[cid] = ToolCall(cid, done.card, "lookup",
                                       "completed" if done.ok else "failed")
        if not ev.reply.done():
            ev.reply.set_result(text)

    async def _run(self, ev: LookupCall, user_added: tuple[str, ...]) -> tools.Done:
        """One look-up in a thread, within its time. A thread cannot be stopped, so the
        work stops itself at the deadline, also when the turn is stopped (Esc cancels
        this); a look-up that raised is answered too: a call left unanswered would keep
        the model's stream waiting for ever."""
        seconds = self.policy.lookup_seconds
        deadline = Deadline(seconds)
        try:
            return await asyncio.wait_for(
                asyncio.to_thread(tools.run, self.lookup, ev.name, ev.arguments,
                                  user_added=user_added, deadline=deadline),
                seconds + self.policy.lookup_grace)
        except TimeoutError:
            return tools.timed_out(ev.name, seconds)
        except Exception as exc:  # (a bug, or the disk: the model is told, the turn goes on)
            return tools.failed(ev.name, exc)
        finally:
            deadline.stop()
