"""The files a conversation shows the model: which ones, each whole or as its outline, and
what each costs in tokens (app/core/conversation/context_budget.py estimates it).

The session (app/core/conversation/session.py) holds one ContextFiles: the UI adds and
removes files, a first question snapshots them into its message, and the status line asks
what they cost before anything is sent. It also knows what the model last saw of each file
(`shown`), so a conversation that goes on sends only the files that changed or are new, as
new items at its end, and knows when the user took a file away (the one reason a new
question is sent in full: the model must stop seeing it).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from app.core.conversation import context_budget as budgets
from app.core.conversation import prompts
from app.core.disk.snapshot import Snapshot
from app.core.disk.workspace import Workspace
from app.core.edits.diff import PendingDiff
from app.core.edits.hunks import DECIDED, Hunk
from app.core.provider import Provider
from app.core.text.names import wire
from app.core.text.textfile import NotText


class ContextError(ValueError):
    """A file asked for as context cannot be used (outside the workspace, binary...)."""


class ContextFiles:
    """The context files of one session, in the order they were added."""

    def __init__(self, ws: Workspace, changed: Callable[[], object] = lambda: None) -> None:
        self.ws = ws
        self.changed = changed  # after a file was added or taken out (the session saves)
        self.paths: list[str] = []
        self.outlined: set[str] = set()  # sent as their outline only
        self._outline_tokens: dict[tuple[str, int, int], int] = {}  # (path, mtime, size)
        # what the conversation has shown the model of each file: (outline only, its digest)
        self.shown: dict[str, tuple[bool, str | None]] = {}

    def add(self, raw: str, *, outline: bool = False) -> str:
        """A file for the model to see: whole, or (`outline`) only its definitions."""
        try:
            rel = self.ws.check_path(raw)
        except ValueError as exc:
            raise ContextError(str(exc)) from None
        if not self.ws.abspath(rel).is_file():
            raise ContextError(f"{rel}: no such file")
        if outline:
            self.outlined.add(rel)
        else:
            self.outlined.discard(rel)
        if rel not in self.paths:
            self.paths.append(rel)
        self.changed()
        return rel

    def remove(self, rel: str) -> None:
        if rel in self.paths:
            self.paths.remove(rel)
        self.outlined.discard(rel)
        self.changed()

    def tokens(self, rel: str, *, outline: bool | None = None) -> int:
        """Estimated tokens of a context file as it would be sent (a stat, or the outline
        read once per version of the file)."""
        outline = rel in self.outlined if outline is None else outline
        try:
            st = self.ws.abspath(rel).stat()
        except OSError:
            return 0
        if not outline:
            return int(st.st_size / budgets.CHARS_PER_TOKEN) + 8
        key = (rel, st.st_mtime_ns, st.st_size)
        if key not in self._outline_tokens:
            try:
                lines = budgets.outline(self.ws.snapshot(rel))
            except (NotText, OSError):
                lines = []
            self._outline_tokens[key] = budgets.estimate_tokens("\n".join(lines)) + 16
        return self._outline_tokens[key]

    def budget(self, sent: Iterable[str], window: int | None, *, files: bool) -> budgets.Budget:
        """The next request's size against the model's context `window`: the texts it sends
        and the context files as they would be sent (`files` False: only those the
        conversation has not shown yet)."""
        tokens = {rel: self.tokens(rel) for rel in self.paths}
        used = sum(budgets.estimate_tokens(t) for t in sent)
        used += sum(n for rel, n in tokens.items() if files or rel not in self.shown)
        return budgets.Budget(used, window, tokens)

    def snapshots(self) -> list[Snapshot]:
        """Every context file as it is now (the bases of a new change set)."""
        snaps = []
        for rel in self.paths:
            try:
                snaps.append(self.ws.snapshot(rel).prepare())
            except NotText as exc:
                raise ContextError(str(exc)) from None
        return snaps

    def now(self, paths: Iterable[str]) -> list[Snapshot]:
        """Other files the model is shown (a retry of the edits it could not apply): those
        of `paths` that exist and read as text, as they are now."""
        snaps = []
        for path in dict.fromkeys(paths):
            with contextlib.suppress(ValueError, NotText, OSError):
                snap = self.ws.snapshot(self.ws.check_path(path))
                if snap.exists:
                    snaps.append(snap)
        return snaps

    def outlines(self, snapshots: list[Snapshot]) -> dict[str, list[str]]:
        """The outlines of the outlined files among `snapshots` (what the model gets of them)."""
        return {s.path: budgets.outline(s) for s in snapshots if s.path in self.outlined}

    # -- what the model has seen ----------------------------------------------------------------
    def seen_as(self, snapshots: Iterable[Snapshot]) -> dict[str, tuple[bool, str | None]]:
        """What a message showing `snapshots` shows the model of each (for `shown`)."""
        return {s.path: (s.path in self.outlined, s.digest if s.exists else None)
                for s in snapshots}

    def unseen(self, snapshots: Sequence[Snapshot]) -> list[Snapshot]:
        """The files of `snapshots` the model has not seen as they are now (changed on disk,
        new to the context, or shown as an outline and now wanted whole)."""
        now = self.seen_as(snapshots)
        return [s for s in snapshots if self.shown.get(s.path) != now[s.path]]

    def taken_away(self) -> str:
        """Why the conversation cannot go on as it is: a file the model saw that the user took
        out of the context, or asked to be sent as its outline only ("" when none)."""
        for path, (outline, _) in self.shown.items():
            if path not in self.paths:
                return f"{path} left the context"
            if path in self.outlined and not outline:
                return f"{path} is sent as its outline now"
        return ""


Telling = tuple[dict[str, tuple[bool, str | None]] | None, set[tuple[int, str]]]


def _text(item: dict[str, Any]) -> str:
    """The text an item of the conversation sends (a message, a look-up's call or output)."""
    texts = [str(item[k]) for k in ("content", "output", "arguments") if isinstance(item.get(k), str)]
    return "\n".join([*texts, *(json.dumps(c) for c in item.get("tool_calls") or ())])


class Conversation:
    """What the model has been sent so far, which only grows: the system prompt, the
    messages after it (with the repository map's items and the look-up rounds' calls and
    outputs, as they were sent), the files it has seen, the decisions on its hunks it was
    told, the version of the map it holds."""

    def __init__(self, files: ContextFiles) -> None:
        self.files = files
        self.system: str | None = None
        self.history: list[dict[str, Any]] = []  # after the system prompt
        self.told: set[tuple[int, str]] = set()  # (hunk id, state) of this change set, told
        self.rejections: list[str] = []  # earlier change sets' rejected proposals, and why
        self.full = ""  # why the request now answered did not continue the conversation
        self.full_next = ""  # why the next one will not (a rewind says so)
        self.response_id: str | None = None  # the server's id of the last answer, if it keeps it
        # the repository map version the conversation holds (knowledge/service.py `items`;
        # None: no map), and the one the request now streaming brings it to
        self.map_version: int | None = None
        self.map_next: int | None = None
        # the project's rules item the conversation holds (rules.py), and the one the request
        # now streaming brings it to
        self.rules: str | None = None
        self._rules_next: str | None = None
        # told with the next question, until one reaches the model (what a set of variants
        # left: app/core/variants/group.py)
        self.notes: list[str] = []
        # what the request now streaming tells (kept once it reached the conversation: a
        # request that failed told the model nothing)
        self._telling: Telling = (None, set())

    def budget(self, draft: str, fmt: str, window: int | None,
               map_tokens: int = 0) -> budgets.Budget:
        """The next request's size: the conversation so far (for its first question, the
        context files and the repository map's `map_tokens`) and the draft."""
        sent = [self.system or prompts.system_prompt(fmt), draft,
                *map(_text, self.history)]
        b = self.files.budget(sent, window, files=not self.history)
        b.used += 0 if self.history else map_tokens
        return b

    def untold(self, pending: PendingDiff | None) -> list[Hunk]:
        """The hunks of the change set decided since the model was last told."""
        return [h for h in pending.hunks if h.state in DECIDED and (h.id, h.state.value)
                not in self.told] if pending is not None else []

    def rejected_so_far(self, pending: PendingDiff | None) -> list[str]:
        """The rejections a conversation started afresh must not forget: earlier ones, then
        the ones of the change set it replaces (with the user's reasons)."""
        fresh = prompts.rejected_lines(pending.hunks) if pending is not None else []
        return (self.rejections + fresh)[-prompts.REJECTIONS_KEPT:]

    def question(self, instruction: str, snapshots: list[Snapshot], fmt: str,
                 pending: PendingDiff | None, *, interrupted: bool,
                 window: int | None = None) -> tuple[str, bool, str]:
        """A new change set's message: (its text, whether it goes on with the conversation,
        why it starts it afresh when it could have gone on). It starts afresh when the user
        took a file away, or when going on would not fit the model's context `window`."""
        why = self.files.taken_away() if self.history else ""
        outlines = self.files.outlines(snapshots)
        if self.history and not why:
            rules = prompts.system_prompt(fmt)
            text = prompts.next_message(
                instruction, self.files.unseen(snapshots), outlines,
                decided="\n".join(filter(None, [prompts.decisions(self.untold(pending)),
                                                 *self.notes])), interrupted=interrupted,
                rules=None if rules == self.system else rules)
            texts = [self.system or "", *map(_text, self.history), text]
            if budgets.Budget(sum(map(budgets.estimate_tokens, texts)), window, {}).fits(0):
                return text, True, ""
            why = "the conversation outgrew the model's context window"
        return prompts.first_message(instruction, snapshots, outlines,
                                     rejected=self.rejected_so_far(pending),
                                     interrupted=interrupted), False, why

    def open(self, content: str, fmt: str, pending: PendingDiff | None,
             snapshots: list[Snapshot] | None, *, afresh: bool, agent: bool,
             repo_map: Sequence[str] = (), rules: Sequence[str] = ()) -> list[dict[str, Any]]:
        """The messages of a request with `content` (`snapshots`: it starts a change set,
        `afresh`: and the conversation), after the project's rules when they are new or
        changed (`rules`) and the repository map's new items (`repo_map`): items of their
        own, appended (an earlier one is never edited)."""
        told = {(h.id, h.state.value) for h in self.untold(pending)}
        if snapshots is not None:
            self.rejections = self.rejected_so_far(pending)
            if afresh:
                self.history, self.system, self.map_version, self.rules = [], None, None, None
            self.told = told = set()
        # a file the instruction named (not a context file) is shown, not kept: named again,
        # it is sent again; not named, it did not leave the context
        kept = [s for s in snapshots if s.path in self.files.paths] if snapshots is not None else None
        self._rules_next = rules[-1] if rules else self.rules
        self._telling = (self.files.seen_as(kept) if kept is not None else None, told)
        content = wire(content)  # what no UTF-8 request can carry (text/names.py), escaped
        if agent:  # it keeps its own conversation: it gets the message
            return [{"role": "user", "content": content}]
        if self.system is None:
            self.system = prompts.system_prompt(fmt)
        return [{"role": "system", "content": self.system}, *self.history,
                *({"role": "user", "content": wire(m)} for m in rules),
                *({"role": "user", "content": wire(m)} for m in repo_map),
                {"role": "user", "content": content}]

    def reached(self, messages: list[dict[str, Any]], answer: str, rid: str | None,
                exchange: Sequence[dict[str, Any]] = ()) -> None:
        """The request reached the model, and this is its answer (as far as it got; `rid`:
        the id the server keeps it by; `exchange`: its look-up rounds' calls and outputs,
        as the back-end sent them, and `answer` the text after them)."""
        self.history = [*messages[1:], *exchange, {"role": "assistant", "content": wire(answer)}]
        self.response_id, self.notes = rid, []
        self.map_version, self.map_next = self.map_next, None
        self.rules = self._rules_next
        shown, told = self._telling
        if shown is not None:
            self.files.shown = shown
        self.told |= told

    def resumed(self, provider: Provider) -> None:
        """A session replayed in this process: a back-end that can, continues the response
        its server keeps instead of sending the conversation again."""
        if provider.capabilities.continue_from and self.response_id and self.history:
            provider.continue_from(self.response_id, [
                {"role": "system", "content": self.system or ""}, *self.history[:-1]],
                self.history[-1]["content"])

    def reset(self) -> None:
        self.system, self.history, self.rejections = None, [], []
        self.response_id = self.map_version = self.map_next = self.rules = None
        self.told, self.files.shown, self.notes = set(), {}, []
