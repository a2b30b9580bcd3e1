"""Tokens and seconds to an accepted change: the tasks of `steer bench task`, the grammar that
holds the embedded model to the whole-file shape, and a newcomer's first request on the
default model (issue 11)."""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import stream

from app.bench.task import make_tasks, run, scripted_answer
from app.core.conversation import prompts
from app.core.disk.workspace import Workspace
from app.core.edits.formats import FORMATS
from app.core.review.review import Review

HELLO = ('def greet(name):\n    return f"Hello, {name}!"\n\n\nif __name__ == "__main__":\n'
         '    print(greet("world"))\n')


def test_the_tasks_are_real_files_with_their_expected_results():
    tasks = make_tasks()
    assert len(tasks) >= 20 and len({t.name for t in tasks}) == len(tasks)
    kinds = {t.name.split(":")[0] for t in tasks}
    assert kinds == {"docstring", "rename", "hint", "typo"}
    for t in tasks:
        assert t.base != t.expected and t.changed_lines >= 1
        compile(t.expected, t.path, "exec")  # the expected result is valid Python
        assert t.base.count("\ndef ") >= 1  # the function and another one: the rest of the file


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_capable_answer_in_each_format_applies_exactly(fmt):
    """What the scripted server sends is what a capable model writes: steer applies it
    exactly, whatever the task (the benchmark's 1.0 is steer's, not the script's luck)."""
    for t in make_tasks():
        with tempfile.TemporaryDirectory() as d:
            Path(d, t.path).write_text(t.base)
            ws = Workspace(d)
            pending = stream(ws, scripted_answer(t, fmt), fmt=fmt, context=[t.path])
            assert not pending.errors, (t.name, pending.errors)
            Review(ws, pending).accept_all()
            assert Path(d, t.path).read_text() == t.expected, (t.name, fmt)


def test_bench_task_prints_the_figures_per_format():
    out = run(quick=True, backends=["scripted"], rate=0)
    assert out["tasks"] == 6
    for fmt in FORMATS:
        f = out["scripted"][fmt]
        assert f["exact_apply_rate"] == 1.0 and f["accepted_files_that_deleted_code"] == 0
        assert f["tokens_per_accepted_changed_line"] > 0 and f["enter_to_disk_s_median"] > 0
    assert out["scripted"]["whole"]["literal_reading_would_delete_code"] == 0
    # whole files cost the most tokens per changed line; the prediction is the file
    assert (out["scripted"]["whole"]["tokens_per_accepted_changed_line"]
            > out["scripted"]["search_replace"]["tokens_per_accepted_changed_line"])
    kept, rejected = out["scripted"]["whole"]["prediction_tokens_accepted_rejected"]
    assert kept > 10 * rejected


def test_the_whole_file_grammar():
    class Snap:
        path = "f.py"
        lines = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"]

    g = prompts.grammar("whole", [Snap()])
    assert g is not None and g.startswith('root ::= line+ "```"')
    assert prompts.grammar("search_replace", [Snap()]) is None
    assert prompts.grammar("whole", [Snap(), Snap()]) is None
    Snap.lines = ["```sh", "x", "```"]
    assert prompts.grammar("whole", [Snap()]) is None  # fenced with ````: left free


# -- the embedded model --------------------------------------------------------------------------
@pytest.mark.model
async def test_the_embedded_model_follows_the_grammar_through_steer_serve(model_server):
    from app.core.events import TextDelta
    from app.core.provider import Request
    from app.providers.local_serve import ServedLocal
    from app.providers.openai_responses import OpenAIResponses

    client = OpenAIResponses(model_server.base_url, "smollm2", model_server.token,
                             capabilities=replace(ServedLocal.capabilities))  # as `local`
    try:
        req = Request([{"role": "user", "content": "Say hello."}], max_tokens=20,
                      grammar='root ::= "steer " [0-9] [0-9]\n')
        text = "".join([e.text async for e in client.stream(req) if isinstance(e, TextDelta)])
        # only the grammar can make a 135M model say exactly this, whatever its version
        assert len(text) == 8 and text.startswith("steer ") and text[6:].isdigit(), text
    finally:
        await client.aclose()


@pytest.mark.model
async def test_a_newcomers_first_request_never_proposes_deleting_unrelated_code(tmp_path):
    """`@hello.py add a docstring to greet` on the default model (`local`: a `steer serve`
    process): whatever it answers, no proposal deletes the file's other code (the main
    block) unflagged, and Accept all keeps it."""
    from app.core.conversation.session import Session
    from app.providers.local_serve import ServedLocal

    (tmp_path / "hello.py").write_text(HELLO)
    session = Session(Workspace(tmp_path), ServedLocal(), context=["hello.py"])
    turn = await session.ask("add a docstring to greet")
    assert turn.error is None, turn.error
    assert session.fmt == "whole"
    for h in session.pending.hunks:
        if not h.warning:
            assert not any("__main__" in t or "print(greet" in t for t in h.old), h
    review = session.review
    review.accept_all()
    text = (tmp_path / "hello.py").read_text()
    assert 'if __name__ == "__main__":\n    print(greet("world"))\n' in text
    assert "def greet(name" in text
    await session.aclose()


def test_bench_task_check_fixes_the_broken_third_and_counts_what_would_have_reached_disk():
    """`steer bench task --check` (app/bench/task_check.py): the scripted first answer is
    broken in tasks 1 and 4 of 6; the check catches each, the fix sent back passes, and the
    broken proposals are the ones Accept all would have written without it."""
    from app.bench.task_check import broken

    for t in make_tasks(quick=True):
        assert broken(t) != t.expected and broken(t).count("\n") == t.expected.count("\n")
    from app.bench import task_check

    out = task_check.run(quick=True, backends=["scripted"], rate=0, rows=True)
    for fmt in FORMATS:
        f = out["scripted"][fmt]
        assert f["broken_first_proposals_that_would_reach_disk"] == 2, fmt
        # nothing that failed the check was written, in any format
        assert all(r["written"] == (r["passed_at"] is not None) for r in f["rows"]), fmt
        assert [r["passed_at"] == 0 for r in f["rows"]] == [False, True, True, False, True, True]
    for fmt in ("whole", "search_replace"):  # the fix, sent against the proposal, applies
        f = out["scripted"][fmt]
        assert f["pass_rate_after_fixes"] == {"0": round(4 / 6, 3), "1": 1.0, "2": 1.0}, fmt
        assert f["written_and_exact"] == 6
        assert [r["passed_at"] for r in f["rows"]] == [1, 0, 0, 1, 0, 0]
