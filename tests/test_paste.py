"""A paste into the prompt is kept whole: the real app driven with Pilot, the paste delivered
as a terminal sends it (bracketed paste, through Textual's own parser), the request reaching
the real loopback server. A long or multi-line paste shows as one token, F2 shows it, Enter
sends exactly the pasted text where its token is; beyond the limit it is refused whole, with
a message, and the prompt keeps what it had."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from pilot import SIZE, Rig, until
from textual.events import Paste
from textual.widgets import TextArea

from app.bench.demo import CALC_ANSWER
from app.ui.compat import PasteSafeParser, paste_text
from app.ui.dialogs.paste import PasteView
from app.ui.widgets.key_bar import KeyBar
from app.ui.widgets.prompt import PromptInput
from app.view.outside_text import visible
from app.view.pastes import LIMIT, Pastes


def pasted(text: str):
    """The Paste event a terminal's bracketed paste of `text` becomes, read by the parser
    the app's driver uses (Textual's, with pastes guarded: app/ui/compat.py)."""
    [event] = list(PasteSafeParser().feed(f"\x1b[200~{text}\x1b[201~"))
    return event


async def type_text(pilot, text: str) -> None:
    await pilot.press(*["space" if ch == " " else ch for ch in text])


def long_paste() -> str:
    """20,000 characters on 312 lines, indented with tabs, no final newline."""
    rows = [f"\tdef f{i}(x):\t# row {i}" for i in range(312)]
    text = "\n".join(rows)
    filler = 20_000 - len(text)
    rows[-1] += "x" * filler
    text = "\n".join(rows)
    assert len(text) == 20_000 and text.count("\n") == 311 and "\t" in text
    return text


def last_user_content(server) -> str:
    return server.stats.bodies[-1]["messages"][-1]["content"]


def shown(prompt: PromptInput) -> str:
    return "".join(seg.text for seg in prompt.render_line(0))


async def test_a_long_paste_is_kept_shown_as_a_token_expanded_by_f2_and_sent_whole(demo):
    paste = long_paste()
    token = "[pasted 20,000 chars · 312 lines]"
    async with Rig(demo, [CALC_ANSWER]) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            prompt = app.query_one(PromptInput)
            await type_text(pilot, "explain this ")
            app.post_message(pasted(paste))
            await until(pilot, lambda: token in prompt.value)
            await type_text(pilot, " and fix it")
            assert prompt.value == f"explain this {token} and fix it"
            await pilot.pause()
            assert token in shown(prompt)  # drawn as the token, not 20,000 characters
            assert "f2 Paste" in app.query_one(KeyBar).plain  # the key bar lists the key
            # F2 shows it whole (escapes would show; tabs expanded)
            await pilot.press("f2")
            await until(pilot, lambda: isinstance(app.screen, PasteView))
            assert app.screen.query_one(TextArea).text == visible(paste)
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, PasteView))
            await pilot.press("enter")
            await until(pilot, lambda: rig.server.stats.bodies and app.session.turn is not None)
    message = f"explain this {paste} and fix it"
    assert app.session.turns[0].instruction == message
    assert last_user_content(rig.server).endswith(message)  # the exact bytes, tabs and all


async def test_several_pastes_keep_their_places_and_backspace_takes_a_token_whole(demo):
    one, two = "line a\nline b\n", "\tindented\ttabs"
    async with Rig(demo, [CALC_ANSWER]) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            prompt = app.query_one(PromptInput)
            await type_text(pilot, "first ")
            app.post_message(pasted(one))
            await pilot.pause()
            await type_text(pilot, " then ")
            app.post_message(pasted(two))
            await pilot.pause()
            await type_text(pilot, " end")
            t1, t2 = "[pasted 14 chars · 2 lines]", "[pasted 14 chars · 1 line]"
            assert prompt.value == f"first {t1} then {t2} end"
            # the cursor steps over a token; Backspace at its end removes all of it
            await pilot.press("left", "left", "left", "left", "left")
            assert prompt.cursor_position == len(f"first {t1} then ")
            await pilot.press("right")
            assert prompt.cursor_position == len(f"first {t1} then {t2}")
            await pilot.press("backspace")
            assert prompt.value == f"first {t1} then  end"
            app.post_message(pasted(two))  # pasted again where the first one was
            await pilot.pause()
            await pilot.press("enter")
            await until(pilot, lambda: rig.server.stats.bodies and app.session.turn is not None)
    assert app.session.turns[0].instruction == f"first {one} then {two} end"
    assert last_user_content(rig.server).endswith(f"first {one} then {two} end")


async def test_a_paste_over_the_limit_is_refused_whole_and_said(demo):
    notes: list[str] = []
    async with Rig(demo, [CALC_ANSWER]) as rig:
        app = rig.app
        notify = app.notify
        app.notify = lambda message, **kw: (notes.append(str(message)), notify(message, **kw))[1]  # type: ignore[method-assign]
        async with app.run_test(size=SIZE) as pilot:
            prompt = app.query_one(PromptInput)
            await type_text(pilot, "keep me")
            app.post_message(pasted("y" * 1_000 + "\n" + "z" * 2_000_000))
            await until(pilot, lambda: notes)
            assert prompt.value == "keep me" and not prompt.pastes.items
            assert "paste refused: 2,001,001 characters" in notes[0]
            assert f"{LIMIT:,}" in notes[0] and "nothing of it was inserted" in notes[0]
            # up to the limit, a paste is kept
            big = "w" * (LIMIT - 100)
            app.post_message(pasted(big))
            await until(pilot, lambda: prompt.pastes.items)
            assert prompt.message == "keep me" + big


async def test_a_paste_holding_markup_and_escapes_is_shown_through_the_boundary(demo):
    hostile = "[/] [bold]x[/bold] [@click=app.quit]q[/] \x1b]2;PWNED\x07 \x1b[2J \u202eevil"
    async with Rig(demo, [CALC_ANSWER]) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            prompt = app.query_one(PromptInput)
            app.post_message(pasted(hostile))
            await pilot.pause()
            token = prompt.pastes.items[0].token
            assert prompt.value == token  # short, but it holds what a terminal obeys: a token
            assert "\x1b" not in shown(prompt)
            await pilot.press("f2")
            await until(pilot, lambda: isinstance(app.screen, PasteView))
            text = app.screen.query_one(TextArea).text
            assert "\x1b" not in text and r"\x1b]2;PWNED\x07" in text and r"\u202eevil" in text
            assert "[@click=app.quit]q[/]" in text  # markup is text
            await pilot.press("escape")
            # a short clean paste with brackets goes in as typed text
            app.post_message(pasted(" [/] [b]"))
            await pilot.pause()
            assert prompt.value == token + " [/] [b]"
            await pilot.press("enter")
            await until(pilot, lambda: rig.server.stats.bodies and app.session.turn is not None)
            assert app.is_running
    assert app.session.turns[0].instruction == hostile + " [/] [b]"


def test_tokens_expand_exactly_and_mentions_come_from_typed_words():
    pastes = Pastes()
    t = pastes.add("@secret.py\nlog line\n", "look at @calc.py ")
    value = f"look at @calc.py {t} please"
    assert pastes.expand(value) == "look at @calc.py @secret.py\nlog line\n please"
    assert "@secret.py" not in pastes.typed(value) and "@calc.py" in pastes.typed(value)


# -- the terminal's side: Textual's parser and the guard -----------------------------------------
KEYS_IF_UNGUARDED = "log \x1b[31mred\x1b[0m\r\x11 quit? \x1b]52;c;aGk=\x07 \ufdd0 end"


def test_textuals_own_parser_turns_a_paste_holding_esc_into_key_presses():
    """Why the guard exists: unguarded, what follows the first ESC of a paste arrives as
    keys (a pasted CR is Enter, \\x11 is Ctrl+Q) and the paste is cut there."""
    from textual._xterm_parser import XTermParser

    events = list(XTermParser().feed(f"\x1b[200~{KEYS_IF_UNGUARDED}\x1b[201~"))
    keys = [e.key for e in events if hasattr(e, "key")]
    assert "enter" in keys and "ctrl+q" in keys


@given(st.lists(st.integers(0, 200), max_size=8), st.text(max_size=40))
def test_a_guarded_paste_is_one_event_with_the_exact_text_however_the_input_is_cut(cuts, extra):
    from hypothesis import assume

    assume("\x1b" not in extra and "\x00" not in extra)
    text = KEYS_IF_UNGUARDED + extra + "\x1b[201"  # (a marker's start inside is text too)
    data = f"ab\x1b[200~{text}\x1b[201~cd"
    parser, events, pos = PasteSafeParser(), [], 0
    for cut in sorted({c for c in cuts if 0 < c < len(data)}):  # ("" would be the end)
        events += list(parser.feed(data[pos:cut]))
        pos = cut
    events += list(parser.feed(data[pos:]))
    pastes = [e for e in events if isinstance(e, Paste)]
    keys = [e.key for e in events if hasattr(e, "key")]
    assert len(pastes) == 1 and paste_text(pastes[0].text) == text
    assert keys == ["a", "b", "c", "d"]  # nothing of the paste came as a key


def test_the_app_reads_terminal_input_with_the_guarded_parser(demo):
    from textual.drivers import linux_driver

    from app.providers.openai_chat import OpenAIChat
    from app.ui.app import SteerApp

    SteerApp(demo, OpenAIChat("http://127.0.0.1:9/v1", "m"), watch_files=False)
    assert linux_driver.XTermParser is PasteSafeParser


async def test_up_brings_a_sent_paste_back_as_its_token(demo):
    paste = "one\ntwo\n"
    async with Rig(demo, [CALC_ANSWER, CALC_ANSWER]) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            prompt = app.query_one(PromptInput)
            await type_text(pilot, "see ")
            app.post_message(pasted(paste))
            await pilot.pause()
            shown_then = prompt.value
            await pilot.press("enter")
            await until(pilot, lambda: app.session.turn is not None and app.session.turn.state == "done")
            await until(pilot, lambda: prompt.value == "")
            prompt.focus()
            await pilot.press("up")
            assert prompt.value == shown_then and prompt.message == f"see {paste}"
    assert app.session.turns[0].instruction == f"see {paste}"  # its own newline kept
