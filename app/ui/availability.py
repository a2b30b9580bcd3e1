"""What the keys can do now: the action table's conditions (app/ui/actions.py), each read
from the one object that owns it.

`CoreState` holds the conditions core objects own (the session shown, the variants, the
LiveTree): core is not reactive, so each is read from its owner when asked, and the screen
compares them each frame (`actions.now`) to tell the key bar when one changed, whoever
changed it (an answer, a decision, git opening, a worker, another variant shown).
The other conditions are reactives with `bindings=True` on the widgets that own them (the
diff's cursor, the review pane, the prompt): a change refreshes the bindings by itself.

`Availability` puts them together for a `check_action` and the palette. It holds no
condition of its own: it routes each name to its owner by the protocol that declares it, so
each condition's value is written once, on its owner, and none is forwarded by hand. The
screen's has every owner; the review pane builds its own from its reactives and core's
(CoreState knows no pane), so no pane asks the screen's picture, which asks the pane back.
"""

from __future__ import annotations

from typing import Any

from app.core.conversation import rewind
from app.core.conversation.session import Session
from app.core.edits.hunks import OPEN, HunkState
from app.core.git.live_tree import LiveTree
from app.core.variants.group import Variants
from app.core.variants.proposal_check import ProposalCheck
from app.ui import actions


class CoreState:
    """The conditions of `actions.Core`, read from core's objects when asked."""

    def __init__(self, variants: Variants, live: LiveTree,
                 checker: ProposalCheck | None = None) -> None:
        self.variants = variants
        self.live = live
        self.checker = checker  # the check of each finished proposal, when a command is set

    @property
    def session(self) -> Session:
        return self.variants.session

    @property
    def streaming(self) -> bool:
        return self.variants.streaming

    @property
    def has_variants(self) -> bool:
        return self.variants.active

    @property
    def any_open(self) -> bool:
        pending = self.session.pending
        return pending is not None and any(h.state in OPEN for h in pending.hunks)

    @property
    def has_queue(self) -> bool:
        return bool(self.session.queue)

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

    @property
    def can_redo_rewind(self) -> bool:
        return rewind.can_redo(self.session)

    @property
    def can_check(self) -> bool:
        return self.variants.active or (self.checker is not None and not self.checker.running)

    @property
    def checks(self) -> bool:
        return self.checker is not None and not self.variants.active

    @property
    def check_failed(self) -> bool:
        return (self.checker is not None and not self.variants.active and not self.streaming
                and self.checker.failure() is not None)


# condition -> the slot of Availability that holds its owner, from the protocols
OWNER = {name: slot for slot, protocol in (
    ("core", actions.Core), ("cursor", actions.Cursor), ("review", actions.Review),
    ("draft", actions.Draft)) for name in actions.members(protocol)}


class Availability:
    """Every condition (an `actions.State`), read from its owner. An owner not given (not on
    screen yet, or not one a widget's keys read) makes its conditions false."""

    __slots__ = ("core", "cursor", "review", "draft")

    def __init__(self, core: actions.Core | None = None, *, cursor: actions.Cursor | None = None,
                 review: actions.Review | None = None, draft: actions.Draft | None = None) -> None:
        self.core = core
        self.cursor = cursor
        self.review = review
        self.draft = draft

    def __getattr__(self, name: str) -> Any:  # only names that are not a slot come here
        slot = OWNER.get(name)
        if slot is None:
            raise AttributeError(name)
        owner = getattr(self, slot)
        return False if owner is None else getattr(owner, name)
