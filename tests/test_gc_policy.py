"""Garbage collection around an answer (app/ui/gc_policy.py): deferred while it streams,
and given back whole when the app closes, also in the middle of an answer."""

from __future__ import annotations

import gc

import pytest

from app.providers.openai_chat import OpenAIChat
from app.ui.app import SteerApp
from app.ui.gc_policy import YOUNG_ONLY, AnswerGC


@pytest.fixture
def gc_state():
    threshold = gc.get_threshold()
    yield threshold
    gc.set_threshold(*threshold)
    gc.unfreeze()


def test_release_gives_full_collections_back_and_thaws(gc_state):
    policy = AnswerGC()
    policy.streaming()
    assert gc.get_threshold()[2] == YOUNG_ONLY and policy.deferring
    gc.freeze()
    assert gc.get_freeze_count() > 0
    policy.release()
    assert gc.get_threshold() == gc_state and not policy.deferring
    assert gc.get_freeze_count() == 0


async def test_an_app_closed_mid_answer_leaves_collection_as_it_found_it(gc_state, tmp_path):
    """The app froze its start-up objects and an answer deferred full collections; once it
    is closed, neither lasts (a process that goes on would keep every app it ran)."""
    (tmp_path / "a.py").write_text("x = 1\n")
    app = SteerApp(tmp_path, OpenAIChat("http://127.0.0.1:9/v1", "x"), watch_files=False, blink=False)
    async with app.run_test(headless=True, size=(120, 40)) as pilot:
        await pilot.pause(0.1)
        assert gc.get_freeze_count() > 0  # start-up is frozen (main screen's mount)
        app.main.gc.streaming()  # as an answer starting does
        assert gc.get_threshold()[2] == YOUNG_ONLY
    assert gc.get_threshold() == gc_state
    assert gc.get_freeze_count() == 0
