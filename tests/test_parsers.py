"""The edit parser on what models really write: prose kept, files named in every way
models name them, formats they were not asked for, and broken output."""

from __future__ import annotations

import pytest

from app.core.edits.formats import choose, choose_format, make_parser
from app.core.edits.formats.events import EditBegin, EditEnd, Line, Malformed, OldEnd, Prose
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


def test_a_whole_file_block_is_an_edit_whichever_format_was_asked():
    # issue 20: in a search/replace answer it used to be printed as prose, dropped silently
    text = "Here:\n\nnotes.md\n```markdown\n# Title\nbody\n```\nDone.\n"
    whole = parse(text, "whole")
    assert EditBegin("notes.md", "whole") in whole and Line("+", "body") in whole
    for fmt in ("search_replace", "apply_patch"):
        ev = parse(text, fmt)
        assert [e for e in ev if not isinstance(e, Prose)] == [
            EditBegin("notes.md", "whole"), Line("+", "# Title"), Line("+", "body"), EditEnd()]
        assert Prose("Done.") in ev and Prose("body") not in ev


def test_a_code_block_after_a_file_name_with_a_search_marker_further_down_stays_search_replace():
    text = ("a.py\n```python\n# the change:\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n"
            ">>>>>>> REPLACE\n```\n")
    ev = parse(text, "search_replace")
    assert [e for e in ev if not isinstance(e, Prose)] == [
        EditBegin("a.py", "update"), Line("-", "x = 1"), OldEnd(), Line("+", "x = 2"), EditEnd()]
    assert Prose("# the change:") in ev


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


def test_choose_format_by_measured_cost():
    plain = Capabilities()
    tiny = Capabilities(preferred_format="whole", model_class="tiny")
    # the tiny model: whole files whatever the size (the other formats never applied exactly)
    assert choose_format(tiny, "SmolLM2", [900]) == "whole"
    assert choose_format(tiny, "SmolLM2", [3]) == "whole"
    # models trained on apply_patch (declared, or OpenAI's by family) keep it for large files
    assert choose_format(plain, "gpt-5.3-codex", [900]) == "apply_patch"
    assert choose_format(plain, "openai/gpt-oss-120b", [900]) == "apply_patch"
    assert choose_format(Capabilities(preferred_format="apply_patch"), "m", [300]) == "apply_patch"
    # others: search/replace for a file of any size, a whole file when it is shorter than a block
    assert choose_format(plain, "qwen3-coder", [900]) == "search_replace"
    assert choose_format(plain, "qwen3-coder", [40]) == "search_replace"
    assert choose_format(plain, "qwen3-coder", [6]) == "whole"
    assert choose_format(plain, "qwen3-coder", [4, 3]) == "whole"  # priced per file
    assert choose_format(plain, "qwen3-coder", [30, 30]) == "search_replace"


def test_the_choice_says_why():
    c = choose(Capabilities(), "qwen3-coder", [6])
    assert c.fmt == "whole" and "6-line file" in c.reason and "tokens to an exact result" in c.reason
    c = choose(Capabilities(preferred_format="whole", model_class="tiny"), "SmolLM2", [6])
    # measured: no format exact for it; whole is what it writes, and steer keeps what it omits
    assert c.fmt == "whole" and "no format applied exactly" in c.reason


# -- format traps: read as a careful reader would, refuse what is ambiguous -------------------
def lines_of(events):
    return [e.text for e in events if isinstance(e, Line)]


def test_a_markdown_file_with_its_own_fences_is_not_cut_at_the_first_one():
    body = ["# Tool", "", "Install:", "```sh", "pip install tool", "```", "", "Use:", "~~~python",
            "import tool", "~~~", "The end."]
    ev = parse("README.md\n```markdown\n" + "\n".join(body) + "\n```\nI added the docs.\n", "whole")
    assert lines_of(ev) == body
    assert ev[-2:] == [EditEnd(), Prose("I added the docs.")]


def test_a_bare_fence_inside_a_document_is_ambiguous_and_refused():
    """`Intro / ``` / code / ``` / End / ````: the first ``` may close the file or open a
    block in it. Both readings hold, so the edit is refused rather than guessed."""
    ev = parse("README.md\n```\nIntro\n```\ncode\n```\nEnd\n```\n", "whole")
    ends = [e for e in ev if isinstance(e, EditEnd)]
    assert len(ends) == 1 and ends[0].refused and "ambiguous" in ends[0].error
    assert "````" in ends[0].error  # says how to write it unambiguously
    assert Prose("End") in ev  # the rest is kept as explanation


def test_a_document_followed_by_prose_or_the_next_file_closes_normally():
    ev = parse("a.md\n```\nA\n```\nRun it:\n```sh\nmake\n```\n\nb.md\n```\nB\n```\nbye\n", "whole")
    assert [e for e in ev if isinstance(e, EditEnd)] == [EditEnd(), EditEnd()]
    assert [e.path for e in ev if isinstance(e, EditBegin)] == ["a.md", "b.md"]
    assert lines_of(ev) == ["A", "B"] and Prose("make") in ev and ev[-1] == Prose("bye")


def test_code_files_close_at_their_fence_at_once():
    p = make_parser("whole", frozenset())
    ev = p.feed("a.py\n```\nx = 1\n```\n")
    assert ev[-1] == EditEnd()  # no look-ahead for a file without inner fences


def test_an_underline_inside_a_search_block_is_not_taken_for_the_divider():
    text = ("docs/index.rst\n```\n<<<<<<< SEARCH\nTitle\n=======\nold text\n=======\nTitle\n"
            "=======\nnew text\n>>>>>>> REPLACE\n```\nafter\n")
    ev = parse(text)
    ends = [e for e in ev if isinstance(e, EditEnd)]
    assert len(ends) == 1 and ends[0].refused and "=======" in ends[0].error
    assert ev[-1] == Prose("after")  # the parser is back in step after the block
    # one divider: fine, whatever the text around it
    ev = parse("docs/index.rst\n<<<<<<< SEARCH\nold text\n=======\nTitle\n-----\n>>>>>>> REPLACE\n")
    assert EditEnd() in ev


BROKEN_THEN_GOOD = [
    # a SEARCH whose code block closes before any divider, then the next file's block
    "a.py\n```python\n<<<<<<< SEARCH\nx = 1\n```\n\nb.py\n```python\n<<<<<<< SEARCH\ny = 1\n"
    "=======\ny = 2\n>>>>>>> REPLACE\n```\n",
    # no fences: a SEARCH without a divider, then the next file's name and block
    "a.py\n<<<<<<< SEARCH\nx = 1\n\nb.py\n<<<<<<< SEARCH\ny = 1\n=======\ny = 2\n>>>>>>> REPLACE\n",
]


@pytest.mark.parametrize("answer", BROKEN_THEN_GOOD)
def test_a_broken_block_does_not_take_the_next_files_edit(answer):
    for cut in (None, 1):  # whole, and one character at a time
        p = make_parser("search_replace", frozenset({"a.py", "b.py"}))
        evs = []
        if cut is None:
            evs = p.feed(answer)
        else:
            for ch in answer:
                evs += p.feed(ch)
        evs += p.finish()
        begins = [e.path for e in evs if isinstance(e, EditBegin)]
        ends = [e for e in evs if isinstance(e, EditEnd)]
        assert begins == ["a.py", "b.py"]
        assert not ends[0].complete and "divider" in ends[0].error
        assert ends[1].complete
        assert [e.text for e in evs if isinstance(e, Line) and e.op == "+"] == ["y = 2"]


# -- file names with brackets, parentheses, spaces, non-ASCII ---------------------------------
ODD_NAMES = ["lib/[id].ts", "app/[slug]/page.tsx", "app/(auth)/login/page.tsx", "[id].ts",
             "routes/$id.tsx", "src/{a,b}.js", "a (copy).py", "my notes/to do.md",
             "données/été.py", "src/日本語.py", "x [draft] v2.txt"]
ON_DISK = frozenset(ODD_NAMES) | {"a.py"}


def parse_with(text: str, fmt: str = "search_replace", exists=ON_DISK.__contains__):
    p = make_parser(fmt, frozenset(), exists)
    return p.feed(text) + p.finish()


@pytest.mark.parametrize("name", ODD_NAMES)
@pytest.mark.parametrize("fmt", ["search_replace", "apply_patch", "whole"])
def test_a_block_for_an_odd_name_edits_that_file_not_the_one_before(fmt, name):
    from render_answers import RENDERERS

    answer = RENDERERS[fmt]("a.py", ["x = 1"], ["x = 2"]) + RENDERERS[fmt](name, ["y = 1"], ["y = 2"])
    ev = parse_with(answer, fmt)
    assert [e.path for e in ev if isinstance(e, EditBegin)] == ["a.py", name]
    assert not any(isinstance(e, Malformed) for e in ev)
    # decorated as models write names
    for header in (f"**{name}**", f"`{name}`", f"{name}:", f"File: {name}"):
        ev = parse_with(f"{header}\n```\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n```\n")
        assert EditBegin(name, "update") in ev, header


def test_a_name_with_spaces_is_a_file_only_when_it_exists():
    text = "a (copy).py\n```\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n```\n"
    assert parse_with(text)[0] == EditBegin("a (copy).py", "update")
    ev = parse_with(text, exists=lambda p: False)  # a sentence with a file's shape: not a name
    assert not any(isinstance(e, EditBegin) for e in ev)
    # a new file with a space in its name: by apply_patch's explicit header
    ev = parse_with("*** Begin Patch\n*** Add File: new dir/a b.py\n+x\n*** End Patch\n", "apply_patch",
                    exists=lambda p: False)
    assert EditBegin("new dir/a b.py", "add") in ev


PROSE_BEFORE_A_BLOCK = [
    "[1] see below",
    "[the guide](docs/guide.md)",
    "See [the guide](docs/guide.md).",
    "![screenshot](img/shot.png)",
    "[guide]: docs/guide.md",
    "[^1]: docs/notes.md",
    "(see below)",
    "Here is the updated a (copy).py",
    "Update `a.py`:",
    "**Changes to lib/[id].ts**",
    "[x] done.",
]


@pytest.mark.parametrize("line", PROSE_BEFORE_A_BLOCK)
def test_prose_and_markdown_links_are_not_taken_for_file_names(line):
    # a block without a name of its own goes to the file named before it
    text = ("a.py\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n"
            f"{line}\n<<<<<<< SEARCH\nz\n=======\nw\n>>>>>>> REPLACE\n")
    ev = parse_with(text)
    assert [e.path for e in ev if isinstance(e, EditBegin)] == ["a.py", "a.py"], line
    assert Prose(line) in ev
    # and a code block after it is prose, not a whole file
    ev = parse_with(f"{line}\n```python\nprint(1)\n```\n", "whole")
    assert not any(isinstance(e, EditBegin) for e in ev), line


@pytest.mark.parametrize("before", ["", "a.py\n"])
def test_a_patch_inside_a_code_block_is_a_patch_not_prose(before):
    # issue 20: a ```diff block holding *** Begin Patch was read as code, dropped silently
    text = (f"The change:\n{before}```diff\n*** Begin Patch\n*** Update File: a.py\n@@\n x = 1\n"
            "-y = 2\n+y = 3\n*** End Patch\n```\nDone.\n")
    for fmt in ("search_replace", "apply_patch", "whole"):
        ev = parse(text, fmt)
        assert [e for e in ev if isinstance(e, (EditBegin, EditEnd))] == [
            EditBegin("a.py", "update", sequential=True), EditEnd()], fmt
        assert Line("+", "y = 3") in ev and Prose("Done.") in ev
        assert Prose("```") not in ev  # the fence that closed the patch is not explanation


def test_a_longer_fence_is_closed_only_by_a_fence_as_long():
    # pins `_closes`: a search/replace block for a Markdown file fenced with ```` keeps the
    # ``` fences inside its SEARCH and REPLACE text; a shorter fence never closes the block
    answer = ("README.md\n````markdown\n<<<<<<< SEARCH\nuse:\n```sh\nmake\n```\n=======\n"
              "use:\n```sh\nmake test\n```\n>>>>>>> REPLACE\n````\nDone.\n")
    for ev in (parse(answer), parse(answer, "whole")):
        assert ev == [EditBegin("README.md", "update"),
                      Line("-", "use:"), Line("-", "```sh"), Line("-", "make"), Line("-", "```"),
                      OldEnd(),
                      Line("+", "use:"), Line("+", "```sh"), Line("+", "make test"),
                      Line("+", "```"),
                      EditEnd(), Prose("Done.")]


@pytest.mark.parametrize("gap", ["\n", "\n\n"])
def test_blank_lines_between_the_file_name_and_its_fence_keep_the_name(gap):
    # pins HOLD: the prose held back while a fence may follow keeps the file name across
    # the blank lines models put between it and the fence
    ev = parse(f"Here it is:\nsrc/app.py\n{gap}```python\n<<<<<<< SEARCH\nold\n=======\nnew\n"
               ">>>>>>> REPLACE\n```\n")
    assert ev[0] == Prose("Here it is:")
    assert EditBegin("src/app.py", "update") in ev
    assert [e for e in ev if isinstance(e, Line)] == [Line("-", "old"), Line("+", "new")]
    assert not any(isinstance(e, Malformed) for e in ev)
