"""Every event a change set publishes to its subscribers (ChangeSet.subscribe), typed.

| event | published by | when | subscribers (in the order they subscribe) |
|---|---|---|---|
| `Arrived` | Session.wake | the answer grew (text, a look-up, an agent's request), once until the UI takes it | Variants, which forwards it to the screen's frame wake |
| `Due` | PendingDiff | an edit ended in a file whose live rebase was put off | git Sync (the rebase runs now) |
| `Rebasing` | rebase.apply | a live rebase is about to move a file onto the disk | Saving (the log keeps the disk read) |
| `RebaseDone` | rebase.apply | it moved: hunks moved, changed state or became conflicts | Variants (conflicts a sibling's accept made become superseded) |
| `Decided` | Review | an accept (what was written, what conflicted), a reject or an undo, as the log's record | Session (checkpoints, saving), Variants (the others rebased onto the disk) |
| `Settled` | Review | hunks changed state by a decision, a replayed one too | the agent host (a write waiting on its hunks is answered) |
| `Opened` | ChangeSet | a new change set opened (a new question): a new pending diff | — |
| `Ended` | Answer.finish | an answer ended (complete, cut short or failed); its edits are closed | the proposal check (variants/proposal_check.py) |
| `Checked` | ProposalCheck | a check of a proposal started or ended | the screen (the answer's title and card) |

Delivery is synchronous, in subscription order (app/core/listeners.py). A session subscribes
first, in its constructor, so a decision is saved before anyone acts on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.core.edits.changes import Due, RebaseDone, Rebasing

if TYPE_CHECKING:
    from app.core.edits.diff import PendingDiff
    from app.core.storage.records import Accept, Reject, Undo

__all__ = ["Arrived", "Checked", "Decided", "Due", "Ended", "Event", "Opened", "RebaseDone",
           "Rebasing", "Settled"]


@dataclass(frozen=True, slots=True)
class Arrived:
    """The answer streaming now grew: the UI draws it in its next frame."""


@dataclass(frozen=True, slots=True)
class Decided:
    """A decision carried out, as the record the session's log keeps: an `Accept` (its
    entry: what was written; its conflicts: what was not), a `Reject`, an `Undo`."""

    record: Accept | Reject | Undo


@dataclass(frozen=True, slots=True)
class Settled:
    """Hunks changed state by a decision (one replayed from the log too)."""


@dataclass(frozen=True, slots=True)
class Opened:
    """A new change set opened on fresh snapshots (a new question): `pending` is its diff."""

    pending: PendingDiff


@dataclass(frozen=True, slots=True)
class Ended:
    """An answer ended (`turn`: the conversation's Turn); its edits are closed."""

    turn: object


@dataclass(frozen=True, slots=True)
class Checked:
    """A check of a proposal started or ended (`turn.check` says which, and how)."""

    turn: object


Event = Arrived | Due | Rebasing | RebaseDone | Decided | Settled | Opened | Ended | Checked
