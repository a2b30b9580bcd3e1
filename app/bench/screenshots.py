"""`make screenshots`: SVGs of the app's main states, rendered through Pilot against a real
loopback server streaming the demo answer. The snapshot tests drive the same scenarios.

    python -m app.bench.screenshots screenshots/
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from textual.pilot import Pilot

from app.bench.demo import CALC, CALC_ANSWER, SUB_ANSWER, VARIANT_ANSWERS
from app.server.chat_server import ServerThread
from app.server.generation import Faults, split_tokens

if TYPE_CHECKING:
    from app.config import Settings
    from app.core.edits.hunks import Hunk
    from app.ui.app import SteerApp

SIZE = (160, 48)
STALL = len(split_tokens(CALC_ANSWER[: CALC_ANSWER.index("if b == 0:") + len("if b == 0:\n")]))


async def until(pilot: Pilot, cond: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError("the app did not reach the expected state")
        await pilot.pause(0.02)


async def settle(pilot: Pilot) -> None:
    """Syntax colours in (they are lexed in a thread), then the frozen picture."""
    from app.ui.widgets.diff_view import DiffView

    diff = pilot.app.query_one(DiffView)
    await pilot.pause(0.05)
    await until(pilot, lambda: not diff.highlighting)
    # the tree's badges, thinned out while an answer streams, shown (a stall shows them too)
    await until(pilot, lambda: not steer_app(pilot).main.files_pane.badges_held)
    await pilot.pause(0.05)
    freeze(steer_app(pilot))


def steer_app(pilot: Pilot) -> SteerApp:
    """The app a scenario drives (Pilot knows it only as an App)."""
    from app.ui.app import SteerApp

    app = pilot.app
    assert isinstance(app, SteerApp)
    return app


def _hunks(app: SteerApp) -> list[Hunk]:
    pending = app.session.pending
    return pending.hunks if pending is not None else []


def _deltas(app: SteerApp) -> int:
    turn = app.session.turn
    return turn.deltas if turn is not None else 0


def freeze(app: SteerApp) -> None:
    """Fixed timings in the status line and no toasts: the same picture on every run."""
    for i, v in enumerate(app.variants.items):
        turn = v.session.turn
        if turn is not None:
            turn.started = 1000.0
            turn.first_token = 1000.012 + i * 0.003 if turn.first_token is not None else None
            turn.ended = 1001.5 - i * 0.25
    app.clear_notifications()
    app.main.frame(force_status=True)


async def _ask(pilot: Pilot, text: str) -> None:
    from app.ui.widgets.prompt import PromptInput

    await until(pilot, lambda: "calc.py" in steer_app(pilot).main.live.files)
    pilot.app.query_one(PromptInput).value = text
    await pilot.press("enter")


async def _done(pilot: Pilot) -> None:
    from app.ui.widgets.diff_view import DiffView

    app = steer_app(pilot)
    diff = app.query_one(DiffView)
    await until(pilot, lambda: app.session.turn is not None and app.session.turn.state == "done")
    await pilot.press("tab")  # the user enters the review (the app never moves the focus)
    await until(pilot, lambda: app.focused is diff)


async def streaming(pilot: Pilot) -> None:
    """Mid-answer: one hunk complete and reviewable, the next one streaming."""
    from app.ui.widgets.diff_view import DiffView

    app = steer_app(pilot)
    await _ask(pilot, "add type hints and guard div against zero")
    await until(pilot, lambda: _deltas(app) >= STALL and len(_hunks(app)) == 2)
    # the diff follows the hunk that streams (its scroll range, and so its scrollbar, grow
    # in steps meanwhile): the picture is taken once it does
    await until(pilot, lambda: app.query_one(DiffView).following)
    await settle(pilot)


async def review(pilot: Pilot) -> None:
    """After the answer: one hunk accepted, one rejected, one pending under the cursor."""
    app = steer_app(pilot)
    await _ask(pilot, "add type hints and guard div against zero")
    await _done(pilot)
    await pilot.press("y")
    await until(pilot, lambda: _hunks(app)[0].state.value == "accepted")
    await pilot.press("n")
    await settle(pilot)


async def conflict(pilot: Pilot) -> None:
    """You edited the lines of a hunk while it was pending: accepting it refuses to write,
    and the conflict shows both sides with its keys (m keeps yours, T takes the proposal)."""
    from app.ui.widgets.diff_view import DiffView

    app = steer_app(pilot)
    await _ask(pilot, "add type hints and guard div against zero")
    await _done(pilot)
    (app.ws.root / "calc.py").write_text(CALC.replace("    return a / b", "    return a / b  # mine"))
    hunks = _hunks(app)
    app.query_one(DiffView).select(hunks[1].id)
    await pilot.press("y")
    await until(pilot, lambda: hunks[1].state.value == "conflict")
    await settle(pilot)


async def help_screen(pilot: Pilot) -> None:
    """The keys (rebindable)."""
    await until(pilot, lambda: "calc.py" in steer_app(pilot).main.live.files)
    await pilot.press("f1")
    await settle(pilot)


async def line_mode(pilot: Pilot) -> None:
    """Line mode on div(): the old and the new signature picked (✓); under the diff,
    what y writes; the key bar has line mode's keys."""
    from app.ui.widgets.diff_view import DiffView

    app = steer_app(pilot)
    await _ask(pilot, "add type hints and guard div against zero")
    await _done(pilot)
    await pilot.press("j", "v", "space", "space")  # (Space picks, then moves down)
    await until(pilot, lambda: len(app.query_one(DiffView).picked) == 2)
    await settle(pilot)


async def redirected(pilot: Pilot) -> None:
    """"add type hints" redirected mid-answer to "only touch sub please": the hunks the first
    answer proposed are marked "before your redirect", and Accept all leaves them."""
    from app.ui.widgets.diff_view import DiffView

    app = steer_app(pilot)
    await _ask(pilot, "add type hints to every function")
    await until(pilot, lambda: _deltas(app) >= STALL and len(_hunks(app)) == 2)
    await _ask(pilot, "only touch sub please")
    await until(pilot, lambda: len(app.session.turns) == 2)
    await _done(pilot)
    app.query_one(DiffView).select(_hunks(app)[0].id)
    await settle(pilot)


async def side_by_side(pilot: Pilot) -> None:
    """The side-by-side view, in the light theme."""
    app = steer_app(pilot)
    await _ask(pilot, "add type hints and guard div against zero")
    await _done(pilot)
    app.theme = "steer-light"
    await pilot.press("s", "j")
    await settle(pilot)


async def _three_variants(pilot: Pilot) -> None:
    """F3 on "type the calculator"; variant 2's add() taken; back on variant 1."""
    from app.ui.widgets.diff_view import DiffView
    from app.ui.widgets.prompt import PromptInput

    app = steer_app(pilot)
    await until(pilot, lambda: "calc.py" in app.main.live.files)
    app.query_one(PromptInput).value = "type the calculator"
    await pilot.press("f3")
    await until(pilot, lambda: len(app.variants.items) == 3 and not app.variants.streaming
                and all(v.session.turn is not None for v in app.variants.items))
    await pilot.press("tab")
    diff = app.query_one(DiffView)
    await until(pilot, lambda: app.focused is diff)
    await pilot.press("right_square_bracket")  # variant 2: its add() is taken
    await until(pilot, lambda: diff.hunk is not None)
    told: list[str] = []  # what the app said: its accept toast lives 2 s, which a loaded
    real_notify = app.notify  # machine can let pass before a poll sees it drawn

    def notify(message: str, *args, **kwargs) -> None:
        told.append(str(message))
        real_notify(message, *args, **kwargs)
    app.notify = notify  # type: ignore[method-assign]
    await pilot.press("y")
    await until(pilot, lambda: "float" in (app.ws.root / "calc.py").read_text())
    # its toast ("accepted…") said, then gone: a dialog later is drawn over a screen
    # without it, every time
    await until(pilot, lambda: any(m.startswith("accepted") for m in told))
    await pilot.pause()  # the toast's message handled
    app.notify = real_notify  # type: ignore[method-assign]
    app.clear_notifications()
    await until(pilot, lambda: not app.screen.query("Toast"))
    await pilot.press("left_square_bracket")  # back to variant 1: its add() gave way
    await until(pilot, lambda: diff.hunk is not None)
    await pilot.press("g")


async def variants(pilot: Pilot) -> None:
    """Three variants of one instruction (F3), tabs over the diff and a card each: variant
    2's add() was taken, so variant 1's add() is superseded; its mul() is still open."""
    await _three_variants(pilot)
    await settle(pilot)


async def compare(pilot: Pilot) -> None:
    """= on div(): each variant's version of the region, side by side."""
    from app.ui.widgets.diff_view import DiffView

    app = steer_app(pilot)
    await _three_variants(pilot)
    await pilot.press("right_square_bracket", "right_square_bracket")  # variant 3: div()
    diff = app.query_one(DiffView)
    await until(pilot, lambda: app.variants.shown == 2 and diff.hunk is not None)
    await pilot.press("equals_sign")
    await pilot.pause(0.2)
    freeze(app)
    await pilot.pause(0.1)


@dataclass
class Scenario:
    name: str
    run: Callable[[Pilot], Awaitable[None]]
    faults: Faults = field(default_factory=Faults)
    # one per variant; a list: that variant's answers, request by request
    answers: Sequence[str | list[str]] = field(default_factory=lambda: [CALC_ANSWER])


SCENARIOS = [
    Scenario("streaming", streaming, Faults(stall_after=STALL)),
    Scenario("review", review),
    Scenario("conflict", conflict),
    Scenario("help", help_screen),
    Scenario("line-mode", line_mode),
    Scenario("redirect", redirected, Faults(stall_after=STALL, only_first=1),
             answers=[[CALC_ANSWER, SUB_ANSWER]]),
    Scenario("variants", variants, answers=VARIANT_ANSWERS),
    Scenario("compare", compare, answers=VARIANT_ANSWERS),
    Scenario("side-by-side", side_by_side),  # last: it leaves the light theme remembered
]


def demo_repo(parent: Path) -> Path:
    root = parent / "demo"
    root.mkdir()
    (root / "calc.py").write_text(CALC)
    (root / "README.md").write_text("# Demo\n\nA calculator.\n")
    for cmd in (["init", "-q", "-b", "main"], ["add", "-A"],
                ["-c", "user.name=d", "-c", "user.email=d@example.com", "commit", "-qm", "init"]):
        subprocess.run(["git", *cmd], cwd=root, check=True)
    return root


@contextmanager
def scenario_app(scenario: Scenario, root: Path,
                 settings: Settings | None = None) -> Iterator[SteerApp]:
    """The app of one scenario in `root`, with a loopback server per answer: variant k always
    gets answer k (one shared server would hand them out in arrival order)."""
    from app.core.provider import Provider
    from app.providers.openai_chat import OpenAIChat
    from app.ui.app import SteerApp

    with ExitStack() as stack:
        servers = [stack.enter_context(ServerThread(replay=a, faults=scenario.faults))
                   for a in scenario.answers]

        def ask(n: int) -> tuple[Provider | None, list[Provider]]:
            return None, [OpenAIChat(s.base_url, "replay") for s in servers[1:n]]

        yield SteerApp(root, OpenAIChat(servers[0].base_url, "replay"), settings,
                       context=["calc.py"], watch_files=False, blink=False, ask=ask)


def render(scenario: Scenario, parent: Path) -> str:
    """The SVG of one scenario, in a fresh demo repository under `parent`."""
    from app.config import Settings
    from app.ui.compat import svg_screenshot

    # the recorded answers are search/replace blocks: say so, as a user's --format would
    with scenario_app(scenario, demo_repo(parent), Settings(format="search_replace")) as app:
        return svg_screenshot(app, SIZE, scenario.run)


def main(argv: list[str]) -> int:
    out = Path(argv[0] if argv else "screenshots")
    out.mkdir(parents=True, exist_ok=True)
    home = tempfile.mkdtemp(prefix="steer-shots-")
    # the pictures must not depend on this user's config or remembered theme
    os.environ["XDG_CONFIG_HOME"] = f"{home}/config"
    os.environ["XDG_STATE_HOME"] = f"{home}/state"
    for scenario in SCENARIOS:
        with tempfile.TemporaryDirectory() as tmp:
            svg = render(scenario, Path(tmp))
        (out / f"{scenario.name}.svg").write_text(svg)
        print(f"wrote {out / scenario.name}.svg")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
