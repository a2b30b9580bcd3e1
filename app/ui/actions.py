"""Every action of the app in one table: its id (the name to rebind it by), default keys,
where the key works, what it runs, its footer label, help text, palette entry and when it is
available. Bindings, the key bar (which entries it keeps on a narrow terminal), the help
screen, the command palette (each entry with its key) and `check_action` all derive from
this table, so an action's facts are written once.

A new key of the review is a row here (scope "review", `run` its name) and one method,
`action_<name>`, on the review pane (app/ui/panes/review.py): its binding, availability, key
bar entry, help line and palette entry all come from the row.

An action's `when` names a condition. Each condition is a property of the protocol of the
one object that owns it (`Core`, `Cursor`, `Review`, `Draft` below); the list of conditions,
what the screen compares each frame and WHEN all derive from those protocols. A new
condition is one property there and its value on the owner (a reactive with
`bindings=True` on a widget; a property of app/ui/availability.py's CoreState for core's).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Literal, Protocol

from textual.binding import Binding, BindingType

Scope = Literal["app", "screen", "review", "diff", "prompt", "tree", "queue"]


class Core(Protocol):
    """The conditions core objects own: the session shown, the variants, the LiveTree
    (app/ui/availability.py reads them). Core is not reactive, so the screen compares these
    each frame (`now`); the others are reactives that refresh the bindings themselves."""

    @property
    def streaming(self) -> bool: ...  # any variant: Esc stops them all
    @property
    def has_variants(self) -> bool: ...  # a set of variants is on screen
    @property
    def any_open(self) -> bool: ...  # the answer has a hunk still to decide
    @property
    def has_queue(self) -> bool: ...
    @property
    def any_accepted(self) -> bool: ...  # in git, with an accepted hunk to stage
    @property
    def in_git(self) -> bool: ...
    @property
    def any_refused(self) -> bool: ...  # edits of the last answer could not be applied
    @property
    def failed(self) -> bool: ...  # the last request failed before any answer: it can be resent
    @property
    def asking(self) -> bool: ...  # an agent waits for an answer to a permission request
    @property
    def can_redo_rewind(self) -> bool: ...  # a rewind of files can be put back
    @property
    def can_check(self) -> bool: ...  # `!` has something to check: the variants, or the proposal
    @property
    def check_failed(self) -> bool: ...  # the answer shown failed its check: F sends it back
    @property
    def checks(self) -> bool: ...  # a check command checks the answer shown (not variants)


class Cursor(Protocol):
    """The diff's hunk cursor (app/ui/widgets/diff_view.py), as reactives."""

    @property
    def hunk_open(self) -> bool: ...  # the hunk under the cursor can be decided
    @property
    def hunk_conflict(self) -> bool: ...  # the hunk under the cursor conflicts with the disk
    @property
    def line_mode(self) -> bool: ...  # the review picks single lines of the hunk


class Review(Protocol):
    """The review pane's (app/ui/panes/review.py), as a reactive."""

    @property
    def can_undo(self) -> bool: ...  # an accept (this session's or the journal's) to undo


class Draft(Protocol):
    """The prompt's (app/ui/widgets/prompt.py), as a reactive."""

    @property
    def named(self) -> Sequence[str]: ...  # the files the draft names (they join its request)


class State(Core, Cursor, Review, Draft, Protocol):
    """Every condition an action's `when` can read, each from the one object that owns it
    (app/ui/availability.py puts them together)."""


def members(protocol: type) -> tuple[str, ...]:
    """The conditions a protocol declares: its properties and its bases'."""
    return tuple(name for cls in protocol.__mro__ for name, member in vars(cls).items()
                 if isinstance(member, property))


# The one list of conditions is the protocols': what the screen compares each frame (CORE),
# the routing to each owner and WHEN below all derive from them, so none can be left out.
CONDITIONS: tuple[str, ...] = members(State)
CORE: tuple[str, ...] = members(Core)


def now(core: Core) -> tuple[bool, ...]:
    """Core's conditions, as they are now: when this changes, what is available may have."""
    return tuple(getattr(core, name) for name in CORE)


# An action's `when`: a condition by its own name, or one of the few that combine two
# (written once, here; mypy holds them to State). The table's test checks every row's
# `when` is one of these.
WHEN: dict[str, Callable[[State], object]] = {
    **{name: attrgetter(name) for name in CONDITIONS},
    "idle": lambda s: not s.streaming,
    "whole_hunk": lambda s: s.hunk_open and not s.line_mode,
    "lines_idle": lambda s: s.line_mode and not s.streaming,
    "redo": lambda s: s.can_redo_rewind and not s.streaming,
    "mark_check": lambda s: s.checks and s.hunk_open and not s.line_mode,
}


@dataclass(frozen=True, slots=True)
class Action:
    id: str  # binding id: the name in the config's [keys] table and the help screen
    keys: str  # default keys, Textual syntax ("j,down"); "" for palette-only actions
    scope: Scope  # the widget whose bindings carry it ("screen": the main screen; "review":
    # the review pane, "diff" its hunk cursor; "app" with priority: every screen, dialogs
    # included, unless a focused input takes the key)
    run: str  # the Textual action: "accept_hunk" runs on the widget of the scope (the review
    # pane's action_accept_hunk), "screen.focus_prompt" on the main screen
    label: str  # footer label
    help: str  # help screen text
    section: str  # help screen section
    palette: str | None = None  # command palette title; None: not in the palette
    when: str | None = None  # a WHEN condition; None: always available
    show: bool = True  # in the footer
    priority: bool = False
    # the key bar keeps what fits, dropping the highest rank first: 0 always stays (Help,
    # Quit: the way out and the way to every other key), 1 the flow's own keys, 3 extras
    bar: int = 2


ACTIONS: tuple[Action, ...] = (
    # typing
    Action("send", "enter", "prompt", "submit", "Send", "send the message; while the model streams: "
           "redirect it", "Prompt"),
    Action("queue", "tab", "prompt", "tab", "Queue / review", "queue the message as a follow-up, "
           "complete an @path; in an empty prompt: go to the review", "Prompt", priority=True, bar=1),
    Action("expand_paste", "f2", "prompt", "expand_paste", "Paste", "show the paste at the "
           "cursor whole (a paste with newlines or over 1,000 characters shows as [pasted N "
           "chars · M lines] and is sent exactly; Backspace removes it)", "Prompt", bar=1),
    Action("drop_named", "ctrl+n", "prompt", "drop_named", "Drop named", "take the file the "
           "message names out of its request (the context line shows it as ◇)", "Prompt",
           palette="Drop the named file from the request", when="named", bar=3),
    Action("history_prev", "up", "prompt", "history_prev", "Earlier", "the instruction sent "
           "before (again: older ones), as in a shell", "Prompt", show=False),
    Action("history_next", "down", "prompt", "history_next", "Later", "the next instruction sent; "
           "past the newest, the draft you were typing", "Prompt", show=False),
    # review
    Action("next_hunk", "j,down", "diff", "next_hunk", "Next", "next hunk (past the last: next file)",
           "Review"),
    Action("prev_hunk", "k,up", "diff", "prev_hunk", "Prev", "previous hunk", "Review", show=False),
    Action("accept_hunk", "y", "review", "accept_hunk", "Accept", "accept the hunk", "Review",
           "Accept hunk", when="whole_hunk", bar=1),
    # line mode's own keys (the key bar shows them while it is on): y takes what is marked ✓
    Action("pick_line", "space", "review", "pick_line", "Pick", "in line mode: pick / unpick "
           "the line under the cursor (✓)", "Review", when="line_mode", bar=1),
    Action("accept_lines", "y", "review", "accept_lines", "Take picked", "in line mode: write "
           "the picked lines (a picked − line goes, a picked + line comes in, every other line "
           "stays as on disk); with nothing picked it writes nothing", "Review", when="line_mode",
           bar=1),
    Action("leave_lines", "escape", "review", "leave_lines", "Back", "leave line mode (the "
           "picks are dropped)", "Review", when="lines_idle", bar=1),
    Action("reject_hunk", "n", "review", "reject_hunk", "Reject", "reject the hunk", "Review",
           "Reject hunk", when="hunk_open", bar=1),
    Action("accept_file", "Y", "review", "accept_file", "Accept file", "accept every open hunk "
           "of the file", "Review", "Accept file", when="any_open"),
    Action("reject_reason", "R", "review", "reject_with_reason", "Reject…", "reject the hunk "
           "and say why in one line (the model is told, so it does not propose it again)",
           "Review", "Reject hunk with a reason", when="hunk_open", show=False),
    Action("reject_file", "N", "review", "reject_file", "Reject file", "reject every open hunk "
           "of the file", "Review", "Reject file", when="any_open", show=False),
    Action("accept_all", "A", "review", "accept_all", "Accept all", "accept every open hunk of "
           "every file", "Review", "Accept all", when="any_open"),
    Action("reject_all", "", "review", "reject_all", "Reject all", "reject every open hunk of "
           "every file", "Review", "Reject all", when="any_open"),
    Action("line_mode", "v", "review", "line_mode", "Lines", "line mode: pick single lines of the "
           "hunk; under the diff, what y writes (⚠ when the file would no longer parse: a "
           "first y then says why and writes nothing, a second takes them)",
           "Review", "Line mode", when="hunk_open", bar=3),
    Action("edit_hunk", "e", "review", "edit_hunk", "Edit", "edit the hunk ($EDITOR, or inline) "
           "and accept the result", "Review", "Edit hunk", when="hunk_open"),
    Action("undo", "u", "review", "undo", "Undo", "undo the last accept (journaled; works "
           "without git); the key bar names it first", "Review", "Undo last accept", when="can_undo"),
    Action("side_by_side", "s", "review", "side_by_side", "Split", "unified / side-by-side view",
           "Review", "Side-by-side", show=False),
    Action("first_hunk", "g", "diff", "first_hunk", "First", "first hunk", "Review", show=False),
    Action("last_hunk", "G", "diff", "last_hunk", "Last", "last hunk", "Review", show=False),
    Action("to_prompt", "tab", "review", "screen.focus_prompt", "Type", "back to the prompt (typing a "
           "letter that is not a review key starts a message too)", "Review", bar=1),
    Action("keep_mine", "m", "review", "keep_mine", "Keep mine", "a conflict: keep your "
           "lines on disk, drop the proposal's", "Review", "Keep my version", when="hunk_conflict",
           bar=1),
    Action("take_theirs", "T", "review", "take_theirs", "Take theirs", "a conflict: write "
           "the proposal over your lines (e edits a mix)", "Review", "Take the proposal",
           when="hunk_conflict", bar=1),
    Action("retry", "r", "review", "retry", "Retry refused", "ask the model again for the "
           "edits that could not be applied, showing it the files as they are", "Review",
           "Retry refused edits", when="any_refused", bar=1),
    # git
    Action("git_view", "d", "review", "cycle_view", "View", "the diff pane shows: pending "
           "changes / working tree vs HEAD / index vs HEAD", "Git", "Git view", bar=3),
    Action("stage", "S", "review", "stage", "Stage", "stage exactly the accepted hunks (like "
           "git add -p; your other changes stay unstaged)", "Git", "Stage accepted hunks",
           when="any_accepted", bar=3),
    Action("commit", "C", "review", "commit", "Commit", "commit what is staged: type a message "
           "(Enter commits one line, Ctrl+J adds a line, Ctrl+S commits several) or let the "
           "model propose one (Ctrl+G)", "Git", "Commit", when="in_git", bar=3),
    # files and queue
    Action("toggle_context", "c", "tree", "toggle_context", "Context ±", "add / remove the file from "
           "the model's context", "Files"),
    Action("edit_queued", "enter,e", "queue", "edit_item", "Edit", "put the queued message back in "
           "the prompt to edit it", "Queue"),
    Action("drop_queued", "delete,d,backspace", "queue", "drop_item", "Drop", "drop the queued "
           "message", "Queue"),
    Action("clear_queue", "", "screen", "screen.clear_queue", "Clear queue", "drop every queued "
           "follow-up", "Queue", "Clear queue", when="has_queue"),
    # anywhere
    Action("interrupt", "escape", "screen", "screen.interrupt", "Stop", "stop the model now",
           "App", "Interrupt", when="streaming", bar=1),
    # priority: it answers from the prompt too (the dialog never opens by itself: rule 8)
    Action("answer_agent", "ctrl+g", "screen", "screen.answer_agent", "Answer the agent", "an "
           "agent asks before it runs a command: its question (y allows once, a always for the "
           "session, n or Esc refuses, or an option's number)", "App", "Answer the agent",
           when="asking", priority=True, bar=1),
    Action("retry_request", "f5", "screen", "screen.retry_request", "Retry", "send the "
           "request that failed again, as a new request (it failed before any answer: a refused "
           "key, a rate limit, a server error, no connection)", "App", "Retry the failed request",
           when="failed"),
    Action("back", "escape", "screen", "screen.back", "Back", "leave line mode, the file tree or the "
           "queue (never moves between typing and reviewing)", "App", when="idle", show=False),
    Action("focus_prompt", "i,slash", "screen", "screen.focus_prompt", "Prompt", "go to the prompt",
           "App", "Focus prompt", show=False),
    Action("focus_files", "ctrl+f", "screen", "screen.focus_files", "Files", "go to the file tree",
           "App", "Focus files", show=False),
    Action("toggle_tree", "ctrl+t", "screen", "screen.toggle_tree", "Files", "show / hide the "
           "file tree (a narrow terminal hides it until you show it)", "Files", "Show / hide files",
           show=False, bar=1),  # the key bar lists it while the tree is hidden or narrow
    # priority: the prompt's own Ctrl+D (delete right; Del does that too) must not win
    Action("focus_diff", "ctrl+d,ctrl+r", "screen", "screen.focus_diff", "Review", "go to the "
           "review (diff), keeping the draft", "App", "Focus diff", show=False, priority=True),
    Action("focus_queue", "ctrl+l", "screen", "screen.focus_queue", "Queue", "go to the queued "
           "follow-ups", "App", "Focus queue", when="has_queue", show=False),
    Action("raw", "w", "screen", "screen.toggle_raw", "Raw", "the conversation as the model wrote "
           "it (edit syntax and all) / with edit cards", "App", "Raw answer text", show=False),
    Action("focus_conversation", "ctrl+o", "screen", "screen.focus_conversation", "Conversation",
           "go to the conversation (j/k move between edit cards, Enter shows one in the diff)",
           "App", "Focus conversation", show=False),
    # variants: one instruction answered several times at once (app/core/variants)
    Action("send_variants", "f3", "prompt", "screen.send_variants", "Variants", "send the message "
           "as several answers at once, each into its own change set (steer --variants N sets "
           "how many, 3 otherwise); take hunks from any of them", "Variants", "Send as variants",
           bar=1),
    Action("next_variant", "right_square_bracket", "screen", "screen.next_variant", "Next variant",
           "show the next variant's answer and diff", "Variants", "Next variant",
           when="has_variants", bar=1),
    Action("prev_variant", "left_square_bracket", "screen", "screen.prev_variant", "Prev variant",
           "show the previous variant", "Variants", "Previous variant", when="has_variants", show=False),
    Action("compare", "equals_sign", "screen", "screen.compare", "Compare", "the region under the "
           "diff's cursor as each variant writes it, side by side", "Variants", "Compare variants",
           when="has_variants", bar=1),
    Action("check_variants", "exclamation_mark", "screen", "screen.check_variants", "Check",
           "run the check command (steer --check CMD, or check in the config) in a throwaway git "
           "worktree: on every finished variant (the tabs mark which passed), or on what Accept "
           "all would leave on disk (what you accepted, and the open hunks)", "Review",
           "Run the check", when="can_check"),
    Action("mark_check", "space", "review", "mark_hunk", "Mark", "mark / unmark the open hunk "
           "for ! (◆): the check then runs on what you accepted plus the marked hunks (none "
           "marked: every open one, as Accept all)", "Review", "Mark hunk for the check",
           when="mark_check", bar=3),
    Action("send_failure", "F", "screen", "screen.send_failure", "Send failure",
           "send the failing check's output to the model as the next message; the fix's hunks "
           "replace the failing ones, as a redirect's do", "Review", "Send the check's failure back",
           when="check_failed", bar=1),
    Action("rewind", "ctrl+b", "screen", "screen.rewind", "Rewind", "rewind to before a turn "
           "(every turn is a checkpoint): the conversation, the files steer wrote, or both; redo",
           "App", "Rewind to before a turn", when="idle", show=False),
    Action("redo_rewind", "r", "screen", "screen.redo_rewind", "Redo", "put back the files "
           "the last rewind took away (in the review, r retries refused edits first, when there "
           "are any)", "App", "Redo the last rewind of files", when="redo", bar=1),
    Action("theme", "t", "screen", "app.next_theme", "Theme", "next theme (remembered)", "App",
           "Next theme", show=False),
    Action("help", "f1,question_mark", "app", "app.help", "Help", "this help: every key (F1 "
           "also from a dialog; closing it goes back there)", "App", "Keys", priority=True, bar=0),
    Action("command_palette", "ctrl+p", "screen", "app.command_palette", "Palette",
           "every command, searchable", "App", show=False),
    Action("quit", "ctrl+q", "screen", "app.quit", "Quit", "quit (asks first while hunks are "
           "open)", "App", "Quit", priority=True, bar=0),
)

BY_ID = {a.id: a for a in ACTIONS}

_KEY_NAMES = {"down": "↓", "up": "↑", "left": "←", "right": "→", "question_mark": "?",
              "slash": "/", "escape": "Esc", "enter": "Enter", "space": "Space", "tab": "Tab",
              "pagedown": "PgDn", "pageup": "PgUp", "delete": "Del", "backspace": "⌫",
              "left_square_bracket": "[", "right_square_bracket": "]", "equals_sign": "=",
              "exclamation_mark": "!"}


def pretty_keys(keys: str, first: bool = False) -> str:
    """"j,down" -> "j, ↓", "ctrl+q" -> "Ctrl+Q"; `first`: only the first key ("j")."""
    out = []
    for k in keys.split(","):
        k = k.strip()
        if not k:
            continue
        if k.startswith("ctrl+"):
            out.append("Ctrl+" + _KEY_NAMES.get(k[5:], k[5:].upper()))
        else:
            out.append(_KEY_NAMES.get(k, k.upper() if k.startswith("f") and k[1:].isdigit() else k))
    return out[0] if first and out else ", ".join(out)


def key_of(names: dict[str, str], action: str) -> str:
    """The first key bound to `action` now, as shown ("Ctrl+D"); "the palette" if none."""
    return pretty_keys(names.get(action, ""), first=True) or "the palette"


def bindings(scope: Scope) -> list[BindingType]:
    """The Textual bindings of one scope (a widget's BINDINGS)."""
    return [Binding(a.keys, a.run, a.label, show=a.show, priority=a.priority, id=a.id)
            for a in ACTIONS if a.scope == scope and a.keys and a.run != "submit"
            and a.id != "command_palette"]


# the Textual action a binding runs ("accept_hunk", "screen.interrupt": its last part) ->
# the `when` of its row; check_action asks once per binding each time the bindings refresh
# (two rows that run the same action: the first that has a `when` decides)
_WHEN_OF: dict[str, str] = {a.run.rsplit(".", 1)[-1]: a.when for a in reversed(ACTIONS) if a.when}


def condition(run: str) -> str | None:
    """The WHEN condition of the action a binding runs (by its Textual action name)."""
    return _WHEN_OF.get(run.rsplit(".", 1)[-1])


def available(run: str, state: State) -> bool:
    when = condition(run)
    return True if when is None else bool(WHEN[when](state))


def key_names(keymap: dict[str, str] | None = None) -> dict[str, str]:
    """action id -> the keys bound now (defaults, then the user's rebinding)."""
    names = {a.id: a.keys for a in ACTIONS if a.keys}
    names.update(keymap or {})
    return names


def review_keys(names: dict[str, str]) -> frozenset[str]:
    """Every key the review or the screen binds (`names`: action id -> keys bound now),
    available now or not: typed in the review, none of them ever becomes text (the key of
    a hunk that cannot be decided does nothing)."""
    return frozenset(k.strip() for a in ACTIONS if a.scope in ("review", "diff", "screen")
                     for k in names.get(a.id, "").split(",") if k.strip())


def palette(state: State) -> Iterable[Action]:
    return (a for a in ACTIONS if a.palette and available(a.run, state))
