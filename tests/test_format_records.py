"""One record per edit format: the registry covers every format the parser, the prompts and
the command line know, each record carries the measured numbers, and nothing outside the
formats package decides by comparing a format's name."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import pytest

from app.cli.common import provider_flags
from app.core.conversation import prompts
from app.core.edits import formats
from app.core.edits.formats import costs
from app.core.edits.formats.events import EditBegin, EditEnd, EditKind, Line, Malformed
from app.core.edits.formats.record import Cost
from app.core.provider import Capabilities
from app.providers.local import LocalModel
from app.providers.local_serve import ServedLocal

APP = Path(__file__).resolve().parent.parent / "app"

# `steer bench task`, 2026-11-23 (costs.MEASURED): (fixed, per line) answer tokens and the
# exact-apply rate per model class. A record that drifts from the measurement fails here.
MEASURED = {
    "whole": (17.0, 9.2, {"capable": 1.0, "tiny": 0.0}),
    "search_replace": (77.3, 0.0, {"capable": 1.0, "tiny": 0.0}),
    "apply_patch": (110.0, 0.0, {"capable": 1.0, "tiny": 0.0}),
}


def events(fmt: str, text: str, known: frozenset[str] = frozenset()) -> list:
    p = formats.make_parser(fmt, known)
    return p.feed(text) + p.finish()


def test_the_registry_is_the_one_list_of_formats():
    assert formats.FORMATS == ("apply_patch", "search_replace", "whole")  # ties break in order
    assert formats.FORMATS == tuple(f.name for f in formats.EDIT_FORMATS)
    assert set(MEASURED) == set(formats.FORMATS)
    for f in (*formats.EDIT_FORMATS, formats.AGENT):
        assert formats.get(f.name) is f and formats.find(f.name) is f
    assert formats.find(formats.AUTO) is None and formats.find("diff") is None
    with pytest.raises(ValueError, match="unknown edit format 'diff'"):
        formats.get("diff")
    # the parser takes exactly the formats a model writes: not the agent's, not auto
    for name in (formats.AGENT.name, formats.AUTO, "diff"):
        with pytest.raises(ValueError, match="unknown edit format"):
            formats.make_parser(name)
    # what --format accepts, and the formats back-ends declare their models trained on
    import argparse
    p = argparse.ArgumentParser()
    provider_flags(p)
    (action,) = [a for a in p._actions if a.dest == "format"]
    assert tuple(action.choices or ()) == formats.CHOICES == ("auto", *formats.FORMATS)
    for caps in (LocalModel.capabilities, ServedLocal.capabilities):
        assert caps.preferred_format in formats.FORMATS


def test_the_prompt_asks_each_format_by_its_record():
    rules = {f.name: f.rules for f in formats.EDIT_FORMATS}
    assert all(rules.values()) and len(set(rules.values())) == len(rules)
    for name, text in rules.items():
        assert prompts.system_prompt(name) == text
    longest = max(rules.values(), key=len)
    assert formats.longest_rules() == longest == rules["apply_patch"]
    # before a format is chosen, and for an agent (which gets no rules): the longest, to be safe
    assert prompts.system_prompt(formats.AUTO) == longest
    assert formats.AGENT.rules == "" and prompts.system_prompt(formats.AGENT.name) == longest


def test_the_parser_reads_the_example_each_prompt_gives():
    """The rules show the format by example; the parser reads that example as edits (the
    whole-file rules describe it in words, and its written answer is read below)."""
    ev = events("apply_patch", formats.get("apply_patch").rules)
    begins = [(e.path, e.kind) for e in ev if isinstance(e, EditBegin)]
    assert begins == [("path/to/file.py", "update"), ("path/to/new_file.py", "add"),
                      ("path/to/obsolete.py", "delete")]
    ev = events("search_replace", formats.get("search_replace").rules)
    begins = [(e.path, e.kind) for e in ev if isinstance(e, EditBegin)]
    assert begins == [("path/to/file.py", "update")]
    assert [e.text for e in ev if isinstance(e, Line)] == [
        "exact lines copied from the file", "the lines that replace them"]
    assert not any(isinstance(e, Malformed) for e in ev)


@pytest.mark.parametrize("fmt", formats.FORMATS)
def test_each_format_writes_what_its_parser_reads(fmt):
    old = ["def f(x):", "    return x", "", "", "def g():", "    pass"]
    new = ["def f(x):", '    """Return x."""', "    return x", "", "", "def g():", "    pass"]
    rec = formats.get(fmt)
    assert rec.write is not None
    ev = events(fmt, rec.write("m.py", old, new, "python"), frozenset({"m.py"}))
    begins = [e for e in ev if isinstance(e, EditBegin)]
    assert begins and all(e.path == "m.py" for e in begins)
    assert {e.kind for e in begins} == ({"whole"} if rec.whole_file else {"update"})
    assert all(e.complete and not e.error for e in ev if isinstance(e, EditEnd))
    assert not any(isinstance(e, Malformed) for e in ev)


def test_an_empty_side_is_written_as_no_lines():
    """A new file is an empty SEARCH part, a deletion an empty REPLACE part (not one empty
    line)."""
    write = formats.get("search_replace").write
    assert write is not None
    ev = events("search_replace", write("new.py", [], ["x = 1"], "python"), frozenset({"new.py"}))
    assert [(e.op, e.text) for e in ev if isinstance(e, Line)] == [("+", "x = 1")]
    ev = events("search_replace", write("m.py", ["a", "b", "c"], ["a", "c"], ""), frozenset({"m.py"}))
    assert [(e.op, e.text) for e in ev if isinstance(e, Line)] == [("-", "b")]


def test_each_record_costs_what_was_measured():
    for name, (fixed, per_line, exact) in MEASURED.items():
        rec = formats.get(name)
        assert rec.cost == Cost(fixed, per_line, exact), name
    assert formats.AGENT.cost is None
    with pytest.raises(TypeError):  # read, never changed
        formats.get("whole").cost.exact["tiny"] = 1.0
    with pytest.raises(ValueError, match="no measured cost"):
        costs.cost(formats.AGENT, [10], "capable", None)
    # whole files are priced by their lines, the others per file (a block each)
    whole, sr, patch = (formats.get(n) for n in ("whole", "search_replace", "apply_patch"))
    assert costs.answer_tokens(whole, [6]) == pytest.approx(17.0 + 9.2 * 6)
    assert costs.answer_tokens(whole, [4, 3]) == pytest.approx(2 * 17.0 + 9.2 * 7)
    assert costs.answer_tokens(whole, []) == 17.0
    assert costs.answer_tokens(sr, [900, 900]) == pytest.approx(2 * 77.3)
    assert costs.answer_tokens(patch, []) == 110.0
    # a model trained on another format applies this one less often; an unknown class is capable
    assert costs.exact_rate(sr, "capable", "apply_patch") == costs.TRAINED_ELSEWHERE
    assert costs.exact_rate(patch, "capable", "apply_patch") == 1.0
    assert costs.exact_rate(sr, "large", None) == 1.0
    assert costs.cost(whole, [6], "tiny", "whole") == float("inf")


def test_what_each_format_means_for_a_request():
    whole, sr, patch = (formats.get(n) for n in ("whole", "search_replace", "apply_patch"))
    assert [f.name for f in formats.EDIT_FORMATS if f.whole_file] == ["whole"]
    assert whole.predictable and whole.prefills_file
    assert not any(f.predictable or f.prefills_file or f.agent for f in (sr, patch))
    assert formats.AGENT.agent and not formats.AGENT.whole_file and formats.AGENT.write is None
    assert [f.label for f in formats.EDIT_FORMATS] == ["apply_patch", "search/replace",
                                                       "whole file"]
    caps = Capabilities()
    assert formats.pick(caps, "m", "search_replace", [900]).fmt == "search_replace"
    assert formats.pick(caps, "m", formats.AUTO, [900]).fmt == "search_replace"
    assert formats.pick(Capabilities(agent=True), "m", "whole", [9]).fmt == formats.AGENT.name


# -- nothing outside app/core/edits/formats compares a format's name -------------------------
NAMES = {*formats.FORMATS, formats.AGENT.name}
# an edit block's kind (EditBegin.kind, Card.kind: update | add | delete | whole) shares the
# word "whole" with the format; a `.kind` compared with such kinds only is not a format
EDIT_KINDS = set(typing.get_args(EditKind))
# in modules another change is restructuring now: to be replaced there, then removed here
# (formats.get(self.fmt).agent != caps.agent)
PENDING: set[tuple[str, str]] = set()


def _constants(node: ast.expr) -> set[str]:
    elts = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
    return {e.value for e in elts if isinstance(e, ast.Constant) and e.value in NAMES}


def _edit_kind(node: ast.Compare, names: set[str]) -> bool:
    sides = [node.left, *node.comparators]
    return names <= EDIT_KINDS and any(isinstance(s, ast.Attribute) and s.attr == "kind"
                                       for s in sides)


def format_name_decisions(tree: ast.AST) -> list[str]:
    """Comparisons (==, !=, in, is; match cases) with a format's name, and tables keyed by
    two or more of them: each a decision by name."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            names = set().union(*map(_constants, [node.left, *node.comparators]))
            if names and not _edit_kind(node, names):
                found.append(ast.unparse(node))
        elif isinstance(node, ast.MatchValue) and _constants(node.value):
            found.append(f"case {ast.unparse(node)}")
        elif isinstance(node, ast.Dict):
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant) and k.value in NAMES}
            if len(keys) >= 2:
                found.append(ast.unparse(node)[:80])
    return found


def test_the_scan_finds_what_it_looks_for():
    """The check below cannot pass by looking at nothing."""
    src = ('if fmt == "whole": pass\nif "agent" != f: pass\nif fmt in ("apply_patch", "x"): pass\n'
           'match fmt:\n    case "search_replace": pass\nT = {"whole": 1, "apply_patch": 2}\n'
           'if ev.kind == "whole": pass\nif ev.kind in ("whole", "add"): pass\n'
           'if err.kind == "agent": pass\nfacts = {"agent": 1}\n')
    assert sorted(format_name_decisions(ast.parse(src))) == sorted([
        "fmt == 'whole'", "'agent' != f", "fmt in ('apply_patch', 'x')",
        "case 'search_replace'", "{'whole': 1, 'apply_patch': 2}", "err.kind == 'agent'"])


def test_no_module_outside_the_formats_package_compares_a_format_name():
    found = set()
    for path in sorted(APP.rglob("*.py")):
        rel = path.relative_to(APP).as_posix()
        if rel.startswith("core/edits/formats/"):
            continue
        found |= {(rel, d) for d in format_name_decisions(ast.parse(path.read_text()))}
    assert found - PENDING == set(), "ask the format's record (app/core/edits/formats `get`)"
    assert PENDING <= found, f"{PENDING - found} is gone: remove it from PENDING"
