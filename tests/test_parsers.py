"""The edit parser on what models really write: prose kept, files named in every way
models name them, formats they were not asked for, and broken output."""

from __future__ import annotations

from app.core.formats import choose_format, make_parser
from app.core.formats.events import EditBegin, EditEnd, Line, Malformed, OldEnd, Prose
from app.core.provider import Capabilities


def parse(text: str, fmt: str = "search_replace", complete: bool = True):
    p = make_parser(fmt, frozenset({"Makefile"}))
    return p.feed(text) + p.finish(complete)


def kinds(events):
    return [type(e).__name__ for e in events]


def test_search_replace_block_with_prose_around():
    ev = parse("Sure, here it is.\n\nsrc/app.py\n```python\n<<<<<<< SEARCH\nold\n=======\nnew\n"
               ">>>>>>> REPLACE\n```\nThat renames it.\n")
    assert ev == [Prose("Sure, here it is."), Prose(""), EditBegin("src/app.py", "update"),
                  Line("-", "old"), OldEnd(), Line("+", "new"), EditEnd(), Prose("That renames it.")]


def test_file_name_variants():
    for header in ("**src/a.py**", "`src/a.py`", "src/a.py:", "# src/a.py", "File: src/a.py"):
        ev = parse(f"{header}\n```\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n```\n")
        assert EditBegin("src/a.py", "update") in ev, header
    ev = parse("```python src/b.py\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n```\n")
    assert ev[0] == EditBegin("src/b.py", "update")
    ev = parse("Makefile\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n")
    assert ev[0] == EditBegin("Makefile", "update")  # a known path needs no extension


def test_block_without_a_name_reuses_previous_file_and_sentences_are_not_paths():
    ev = parse("a.py\n<<<<<<< SEARCH\n1\n=======\n2\n>>>>>>> REPLACE\nDone.\n"
               "<<<<<<< SEARCH\n3\n=======\n4\n>>>>>>> REPLACE\n")
    begins = [e for e in ev if isinstance(e, EditBegin)]
    assert begins == [EditBegin("a.py", "update"), EditBegin("a.py", "update")]
    assert Prose("Done.") in ev


def test_block_with_no_file_at_all_is_malformed_and_swallowed():
    ev = parse("<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\nafter\n")
    assert isinstance(ev[0], Malformed) and ev[-1] == Prose("after")
    assert not any(isinstance(e, Line) for e in ev)


def test_missing_replace_marker_is_an_error_on_that_edit():
    ev = parse("a.py\n<<<<<<< SEARCH\nx\n=======\ny\n")
    assert ev[-1] == EditEnd(False, "the answer ended inside a SEARCH/REPLACE block")
    ev = parse("a.py\n<<<<<<< SEARCH\nx\n=======\ny\n", complete=False)
    assert ev[-1].error.startswith("the answer stopped")


def test_whole_file_only_when_asked():
    text = "Here:\n\nnotes.md\n```markdown\n# Title\nbody\n```\n"
    whole = parse(text, "whole")
    assert EditBegin("notes.md", "whole") in whole and Line("+", "body") in whole
    prose = parse(text, "search_replace")
    assert not any(isinstance(e, EditBegin) for e in prose)
    assert Prose("notes.md") in prose and Prose("body") in prose  # kept as explanation


def test_whole_file_fence_longer_than_inner_fences():
    ev = parse("README.md\n````\nuse:\n```sh\nmake\n```\n````\n", "whole")
    lines = [e.text for e in ev if isinstance(e, Line)]
    assert lines == ["use:", "```sh", "make", "```"]


def test_search_replace_inside_whole_format_is_recognised():
    ev = parse("a.py\n```\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n```\n", "whole")
    assert ev[0] == EditBegin("a.py", "update") and OldEnd() in ev


def test_apply_patch_all_sections():
    text = ("Patch:\n*** Begin Patch\n*** Update File: a.py\n*** Move to: b.py\n@@ def f():\n ctx\n"
            "-old\n+new\n@@\n x\n+y\n*** Add File: n.txt\n+hello\n*** Delete File: gone.txt\n"
            "*** End Patch\nbye\n")
    ev = parse(text, "apply_patch")
    assert ev[0] == Prose("Patch:")
    assert ev[1] == EditBegin("a.py", "update", anchor="def f():", sequential=True, move_to="b.py",
                              first_in_section=True)
    assert ev[2:5] == [Line(" ", "ctx"), Line("-", "old"), Line("+", "new")]
    assert ev[5] == EditEnd()
    assert ev[6].first_in_section is False
    assert EditBegin("n.txt", "add") in ev and Line("+", "hello") in ev
    i = ev.index(EditBegin("gone.txt", "delete"))
    assert ev[i + 1] == EditEnd()
    assert ev[-1] == Prose("bye")


def test_truncated_patch_marks_the_open_chunk():
    ev = parse("*** Begin Patch\n*** Update File: a.py\n@@\n x\n-y\n", "apply_patch", complete=False)
    assert ev[-1] == EditEnd(False, "a.py: the answer stopped inside the patch")
    # a patch that just forgot *** End Patch at a normal stop still counts
    ev = parse("*** Begin Patch\n*** Update File: a.py\n@@\n x\n-y\n", "apply_patch")
    assert ev[-1] == EditEnd()


def test_unknown_directive_is_malformed():
    ev = parse("*** Begin Patch\n*** Frobnicate: a.py\n*** End Patch\n", "apply_patch")
    assert any(isinstance(e, Malformed) and "Frobnicate" in e.message for e in ev)


def test_crlf_answers_parse_like_lf():
    lf = parse("a.py\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n")
    assert parse("a.py\r\n<<<<<<< SEARCH\r\nx\r\n=======\r\ny\r\n>>>>>>> REPLACE\r\n") == lf


def test_choose_format():
    plain, tiny = Capabilities(), Capabilities(preferred_format="whole")
    assert choose_format(tiny, "SmolLM2", [900]) == "whole"  # declared by the back-end
    assert choose_format(plain, "gpt-5.3-codex", [900]) == "apply_patch"
    assert choose_format(plain, "openai/gpt-oss-120b", [900]) == "apply_patch"
    assert choose_format(plain, "qwen3-coder", [900]) == "search_replace"
    assert choose_format(plain, "qwen3-coder", [12]) == "whole"
