"""What the keys can do now: the action table's conditions (`actions.State`, app/ui/actions.py)
read from the session, the review's cursor and the LiveTree. Bindings, the key bar and the
palette ask it through `actions.available`; the main screen hands it to the review pane and
tells it where the review is once it is mounted. Nothing here is cached: each condition is
read from its owner when asked, and the screen compares all of them (`actions.now`) each
frame, so the key bar follows a change whoever made it."""

from __future__ import annotations

from typing import Protocol

from app.core.conversation import rewind
from app.core.conversation.session import Session
from app.core.edits.hunks import OPEN, HunkState
from app.core.git.live_tree import LiveTree
from app.core.variants.group import Variants


class Cursor(Protocol):
    """The review's side of it (app/ui/panes/review.py)."""

    @property
    def hunk_open(self) -> bool: ...
    @property
    def line_mode(self) -> bool: ...
    @property
    def hunk_conflict(self) -> bool: ...
    @property
    def can_undo(self) -> bool: ...


class Draft(Protocol):
    """The prompt's side of it (app/ui/widgets/prompt.py)."""

    named: list[str]  # files the draft names


class Availability:
    def __init__(self, variants: Variants, live: LiveTree) -> None:
        self.variants = variants
        self.live = live
        self.review: Cursor | None = None  # None until the review is on screen
        self.prompt: Draft | None = None  # likewise the prompt

    @property
    def can_redo_rewind(self) -> bool:
        return rewind.can_redo(self.session)

    @property
    def named(self) -> bool:
        return self.prompt is not None and bool(self.prompt.named)

    @property
    def session(self) -> Session:
        return self.variants.session

    @property
    def streaming(self) -> bool:
        return self.variants.streaming  # any variant: Esc stops them all

    @property
    def has_variants(self) -> bool:
        return self.variants.active

    @property
    def hunk_open(self) -> bool:
        return self.review is not None and self.review.hunk_open

    @property
    def line_mode(self) -> bool:
        return self.review is not None and self.review.line_mode

    @property
    def any_open(self) -> bool:
        pending = self.session.pending
        return pending is not None and any(h.state in OPEN for h in pending.hunks)

    @property
    def can_undo(self) -> bool:
        return self.review is not None and self.review.can_undo

    @property
    def has_queue(self) -> bool:
        return bool(self.session.queue)

    @property
    def hunk_conflict(self) -> bool:
        return self.review is not None and self.review.hunk_conflict

    @property
    def any_accepted(self) -> bool:
        pending = self.session.pending
        return self.in_git and pending is not None and any(
            h.state == HunkState.ACCEPTED for h in pending.hunks)

    @property
    def in_git(self) -> bool:
        return self.live.in_git

    @property
    def any_refused(self) -> bool:
        return bool(self.session.refused) and not self.session.streaming

    @property
    def failed(self) -> bool:
        return self.session.failed is not None

    @property
    def asking(self) -> bool:
        return bool(self.session.agent.permissions)
