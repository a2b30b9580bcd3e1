"""The repository map: ranking, budget, byte-stable rendering, updates, the disk cache, and a
builder that never makes a request wait. Real git repositories in temp dirs, real files, the
real parsers and worker processes; no timing assertions (`steer bench context` measures)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from conftest import git, init_repo
from hypothesis import given
from hypothesis import strategies as st

from app.bench.trees import generate_tree
from app.core.knowledge.builder import MapBuilder
from app.core.knowledge.delta import net
from app.core.knowledge.pagerank import pagerank, push
from app.core.knowledge.queries import QUERIES
from app.core.knowledge.render import estimate_tokens
from app.core.knowledge.tags import extract

FILES = {
    "pkg/__init__.py": "",
    "pkg/cli.py": ("from pkg.parsing import parse_header_line\nfrom pkg.store import save_record\n\n"
                   "def main(argv):\n    rec = parse_header_line(argv[0])\n    save_record(rec)\n"
                   "    return 0\n"),
    "pkg/parsing.py": ("import re\n\n\nclass HeaderError(ValueError):\n    pass\n\n\n"
                       "def parse_header_line(line: str) -> dict:\n    key, _, value = line.partition(':')\n"
                       "    if not key:\n        raise HeaderError(line)\n    return {key: value}\n\n\n"
                       "def split_fields(text):\n    return [parse_header_line(x) for x in text.splitlines()]\n"),
    "pkg/store.py": ("class RecordStore:\n    def __init__(self, path):\n        self.path = path\n\n"
                     "    def put(self, record):\n        return save_record(record)\n\n\n"
                     "def save_record(record):\n    return dict(record)\n"),
    "web/app.js": ("import { formatPrice } from './util.js';\n\nexport function renderCart(items) {\n"
                   "  return items.map((i) => formatPrice(i.price));\n}\n"),
    "web/util.js": "export function formatPrice(cents) {\n  return (cents / 100).toFixed(2);\n}\n",
    "svc/main.go": ("package main\n\nfunc LoadOrders(limit int) []int {\n\treturn nil\n}\n\n"
                    "func main() {\n\tLoadOrders(3)\n}\n"),
    "README.md": "# demo\n",
    "docs/guide.txt": "How to use the demo.\n",
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return init_repo(tmp_path / "project", FILES)


def built(root: Path, cache: Path | bool = False, **kw) -> MapBuilder:
    b = MapBuilder(root, cache=cache, rank_delay=0.0, **kw).start()
    assert b.wait(120)
    return b


def blocks(text: str) -> dict[str, str]:
    """Each file's entry in a rendered map: its path line and its definitions."""
    out: dict[str, str] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("Other files by folder") or line.startswith("Repository map"):
            current = None
        elif line and not line[0].isdigit() and not line.startswith("…") and (
                line.endswith(":") or "/" in line and " " not in line):
            current = line.rstrip(":")
            out[current] = line + "\n"
        elif current:
            out[current] += line + "\n"
    return out


def test_every_query_compiles_against_its_grammar():
    from tree_sitter import Query
    from tree_sitter_language_pack import get_language

    for lang, query in QUERIES.items():
        Query(get_language(lang), query)  # raises on a node or field the grammar lacks


@pytest.mark.parametrize("path,source,name,line", [
    ("a.py", "import os\n\nclass A:\n    def run(self):\n        return os.getcwd()\n", "run", 4),
    ("a.js", "class Cart {\n  total() { return 1; }\n}\nfunction make() {}\n", "make", 4),
    ("a.ts", "interface Shape { area(): number }\nexport const build = () => 1;\n", "build", 2),
    ("a.go", "package a\n\ntype Box struct{}\n\nfunc (b Box) Open() {}\n", "Open", 5),
    ("a.rs", "struct Cell;\nimpl Cell {\n    fn grow(&self) {}\n}\n", "grow", 3),
    ("a.java", "class Shop {\n  void checkout() {}\n}\n", "checkout", 2),
    ("a.c", "static int add(int a, int b) {\n  return a + b;\n}\n", "add", 1),
    ("a.rb", "class Dog\n  def bark\n  end\nend\n", "bark", 2),
    ("a.kt", "class Deck {\n  fun shuffle() {}\n}\n", "shuffle", 2),  # Pygments, no query
])
def test_definitions_with_their_lines(path, source, name, line):
    tags = extract(path, source.encode())
    assert tags is not None
    assert (name, line) in {(d[0], d[1]) for d in tags[0]}


def test_binary_and_data_files_are_listed_not_parsed():
    assert extract("blob.py", b"\0\x01\x02def x(): pass") is None
    assert extract("data.json", b'{"def": 1}') is None


def test_the_file_defining_a_named_function_ranks_first(project):
    with built(project) as b:
        m = b.current("parse_header_line should accept a missing colon")
        assert m.complete
        assert m.files[0] == "pkg/parsing.py"
        assert "8: def parse_header_line(line: str) -> dict:" in m.text
        js = b.current("rename formatPrice to formatAmount")
        assert js.files[0] == "web/util.js"
        go = b.current("make the LoadOrders function take a context")
        assert go.files[0] == "svc/main.go"


def test_a_named_path_comes_first_and_context_brings_what_it_uses(project):
    with built(project) as b:
        m = b.current("look at store.py please")
        assert m.files[0] == "pkg/store.py"
        ctx = b.current("make it faster", context=["pkg/cli.py"])
        # cli.py uses parse_header_line and save_record: their files come before the rest
        assert set(ctx.files[:3]) >= {"pkg/parsing.py", "pkg/store.py"}
        omitted = b.current("make it faster", context=["pkg/cli.py"], omit=["pkg/cli.py"])
        assert "pkg/cli.py" not in omitted.files


@given(budget=st.integers(min_value=0, max_value=700),
       words=st.sampled_from(["", "parse_header_line", "formatPrice in web", "save_record main"]))
def test_the_budget_is_respected(shared_project_builder, budget, words):
    m = shared_project_builder.current(words, budget=budget)
    assert m.tokens <= budget
    assert estimate_tokens(m.text) == m.tokens


@pytest.fixture(scope="module")
def shared_project_builder(tmp_path_factory):
    root = init_repo(tmp_path_factory.mktemp("shared") / "p", FILES)
    b = built(root)
    yield b
    b.close()


def test_rendering_is_byte_stable_across_calls_builders_and_the_cache(project, tmp_path):
    cache = tmp_path / "cache"
    ask = ("fix parse_header_line", ["pkg/cli.py"], 400)
    with built(project, cache) as a:
        first = a.current(*ask).text
        assert a.current(*ask).text == first
    with built(project) as fresh:  # no cache: parsed again
        assert fresh.current(*ask).text == first
    with built(project, cache) as warm:  # from the cache
        assert warm.parsed == 0
        assert warm.current(*ask).text == first


def test_an_update_after_changing_one_file_changes_only_its_entries(project):
    with built(project) as b:
        before = b.current("", budget=4000)
        v = before.version
        target = project / "pkg" / "store.py"
        target.write_text(target.read_text() + "\n\ndef drop_record(record):\n    return None\n")
        b.update([str(target)])  # absolute, as a watcher may pass it
        assert b.wait(60)
        after = b.current("", budget=4000)
        assert after.version > v
        old, new = blocks(before.text), blocks(after.text)
        assert set(old) == set(new)
        changed = {p for p in old if old[p] != new[p]}
        assert changed == {"pkg/store.py"}
        assert "13: def drop_record(record):" in new["pkg/store.py"]
        delta = b.changes_since(v)
        assert delta is not None and delta.files == ("pkg/store.py",)
        assert "changed pkg/store.py:" in delta.text and "drop_record" in delta.text
        assert b.changes_since(after.version).text == ""  # nothing since: nothing to send
        ask = ("make save_record faster", ["pkg/cli.py"], 600)
        kept = b.current(*ask).text
    with built(project) as fresh:  # a new builder on the same tree: the same bytes
        assert fresh.current(*ask).text == kept


def test_updates_add_delete_and_ignore(project):
    git(project, "rm", "-q", "--cached", "README.md")
    (project / ".gitignore").write_text("build/\n")
    with built(project) as b:
        v = b.current().version
        (project / "pkg" / "new_mod.py").write_text("def brand_new_thing():\n    pass\n")
        (project / "build").mkdir()
        (project / "build" / "gen.py").write_text("def generated():\n    pass\n")
        (project / "web" / "util.js").unlink()
        b.update(["pkg/new_mod.py", "build/gen.py", "web/util.js", ".git/index"])
        assert b.wait(60)
        files = b.files()
        assert "pkg/new_mod.py" in files and "web/util.js" not in files
        assert "build/gen.py" not in files  # ignored: never in the map
        assert b.current("brand_new_thing").files[0] == "pkg/new_mod.py"
        assert b.current("look at new_mod.py").files[0] == "pkg/new_mod.py"
        assert "web/util.js" not in b.current("and util.js?").files
        delta = b.changes_since(v)
        assert delta is not None
        assert "added pkg/new_mod.py:" in delta.text and "deleted web/util.js" in delta.text


def test_a_folder_moved_and_a_branch_switched(project):
    with built(project) as b:
        os.rename(project / "web", project / "webapp")
        b.update(["web", "webapp"])  # a watcher may report only the folders
        assert b.wait(60)
        assert {"webapp/app.js", "webapp/util.js"} <= set(b.files())
        assert not any(p.startswith("web/") for p in b.files())
        git(project, "add", "-A")
        git(project, "commit", "-qm", "move")
        git(project, "checkout", "-q", "-b", "other")
        (project / "pkg" / "extra.py").write_text("def only_on_other():\n    pass\n")
        git(project, "add", "-A")
        git(project, "commit", "-qm", "extra")
        git(project, "checkout", "-q", "main")
        b.rescan()  # nothing told the builder about extra.py coming and going
        assert b.wait(60)
        assert "pkg/extra.py" not in b.files()
        git(project, "checkout", "-q", "other")
        b.rescan()
        assert b.wait(60)
        assert b.current("only_on_other").files[0] == "pkg/extra.py"


def test_the_cache_makes_a_second_builder_start_full(project, tmp_path):
    cache = tmp_path / "state"
    with built(project, cache) as first:
        assert first.parsed > 0
    assert list(cache.iterdir()) and not any(p.name.startswith(".steer") for p in project.iterdir())
    second = MapBuilder(project, cache=cache).start()
    try:
        assert second.wait(60)
        assert second.parsed == 0 and second.status().complete
        assert second.current("parse_header_line").complete
        # a file changed while steer was not running is read again, and only that one
        (project / "pkg" / "cli.py").write_text("def main():\n    return 1\n")
    finally:
        second.close()
    with built(project, cache) as third:
        assert third.parsed == 1


def test_the_cache_lives_in_the_state_dir(project, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    with built(project, True):
        pass
    found = list((tmp_path / "xdg" / "steer" / "repomap").iterdir())
    assert len(found) == 1 and (found[0] / "tags.bin").is_file()
    assert git(project, "status", "--porcelain") == ""


def test_a_damaged_cache_is_ignored(project, tmp_path):
    cache = tmp_path / "c"
    with built(project, cache):
        pass
    data = (cache / "tags.bin").read_bytes()
    (cache / "tags.bin").write_bytes(data[:-10] + b"0123456789")
    with built(project, cache) as b:
        assert b.parsed > 0 and b.current("save_record").files[0] == "pkg/store.py"


def test_current_never_waits_for_a_build(tmp_path):
    """A 3,000-file tree builds in worker processes while the build is held (its cache file
    is a FIFO nobody writes yet): current() answers at once with the paths map."""
    root = tmp_path / "big"
    defined = generate_tree(root, 3000)
    cache = tmp_path / "cache"
    cache.mkdir()
    os.mkfifo(cache / "tags.bin")
    b = MapBuilder(root, cache=cache, workers=2).start()
    try:
        answers = []
        # the build publishes the paths, then blocks reading the FIFO
        for _ in range(2000):
            if b.status().state == "building":
                break
            threading.Event().wait(0.01)
        assert b.status().state == "building"
        name = defined[-1][1]
        asker = threading.Thread(target=lambda: answers.append(b.current(f"fix {name}")))
        asker.start()
        asker.join(30)  # a hang detector, not a timing assertion
        assert answers, "current() waited for the build"
        m = answers[0]
        assert not m.complete and m.text.startswith("Repository map (file names only")
        assert 0 < m.tokens <= 1500 and m.total_files > 3000
        assert "building" in b.status().line()
        with open(cache / "tags.bin", "wb") as fifo:  # let the build go on
            fifo.write(b"not a cache")
        assert b.wait(300)
        full = b.current(f"fix {name}")
        assert full.complete and full.files[0] == defined[-1][0]
        assert b.parsed == 3000 + 1 + len({p.split("/")[0] for p, _ in defined})  # + README, __init__s
    finally:
        b.close()


def test_status_line():
    from app.core.knowledge.render import MapStatus

    assert MapStatus("building", 1240, 496, 1240, 1).line() == "map: 1,240 files · building 40%"
    assert MapStatus("ready", 1240, 1240, 1240, 2).line() == "map: 1,240 files"
    assert MapStatus("listing", 0, 0, 0, 0).line() == "map: listing files…"


def test_outside_a_repository_the_map_walks_the_folder(tmp_path):
    root = tmp_path / "plain"
    (root / "node_modules" / "x").mkdir(parents=True)
    (root / "node_modules" / "x" / "index.js").write_text("function hidden() {}\n")
    (root / "tool.py").write_text("def only_here():\n    pass\n")
    with built(root) as b:
        assert b.files() == ["tool.py"]
        assert b.current("only_here").files == ("tool.py",)


def test_key_values_never_reach_the_map(project):
    (project / "pkg" / "keys.py").write_text("def connect(key='sk-live-1234567890'):\n    pass\n")
    with built(project, hidden=["sk-live-1234567890"]) as b:
        m = b.current("connect", budget=3000)
        assert "sk-live-1234567890" not in m.text


# -- PageRank ---------------------------------------------------------------------------------
graphs = st.integers(min_value=1, max_value=12).flatmap(
    lambda n: st.lists(st.lists(st.tuples(st.integers(0, n - 1), st.floats(0.1, 5.0)),
                                max_size=4), min_size=n, max_size=n))


def _normalized(rows):
    out = []
    for row in rows:
        total = sum(w for _, w in row)
        out.append([(j, w / total) for j, w in row])
    return out


@given(graphs)
def test_pagerank_is_a_distribution_and_deterministic(rows):
    rows = _normalized(rows)
    r = pagerank(rows)
    assert abs(sum(r) - 1.0) < 1e-6 and all(x > 0 for x in r)
    assert pagerank(rows) == r


@given(graphs)
def test_a_small_graph_ranked_in_python_ranks_as_numpy_does(rows):
    """Below pagerank.SMALL_GRAPH edges the rank is computed without numpy (its import costs
    a launch more than the rank): the same iteration, the same numbers."""
    from app.core.knowledge import pagerank as pr

    rows = _normalized(rows)
    src = [i for i, row in enumerate(rows) for _ in row]
    dst = [j for row in rows for j, _ in row]
    w = [x for row in rows for _, x in row]
    assert len(src) <= pr.SMALL_GRAPH  # what pagerank() takes for these graphs
    python = pr.pagerank_edges(len(rows), src, dst, w)
    small, pr.SMALL_GRAPH = pr.SMALL_GRAPH, -1
    try:
        numpy = pr.pagerank_edges(len(rows), src, dst, w)
    finally:
        pr.SMALL_GRAPH = small
    assert all(abs(a - b) < 1e-12 for a, b in zip(python, numpy, strict=True))


@given(graphs)
def test_push_from_every_node_adds_up_to_pagerank(rows):
    """PageRank is the average of the personalised ranks from each node (linearity), so the
    local push, run to convergence from every node, must give it back."""
    # pagerank() spreads dangling nodes' mass uniformly; push keeps it in place: give every
    # node an edge (to the next one), so that every example is compared
    rows = [row or [((i + 1) % len(rows), 1.0)] for i, row in enumerate(rows)]
    rows = _normalized(rows)
    n = len(rows)
    assert all(rows)
    total = [0.0] * n
    for s in range(n):
        for node, mass in push({s: 1.0}, lambda u: rows[u], eps=1e-12, max_pushes=10**6).items():
            total[node] += mass / n
    assert all(abs(a - b) < 1e-4 for a, b in zip(total, pagerank(rows), strict=True))


def test_net_changes():
    assert net([{"a": "added"}, {"a": "changed"}]) == {"a": "added"}
    assert net([{"a": "added"}, {"a": "deleted"}]) == {}
    assert net([{"a": "deleted"}, {"a": "added"}]) == {"a": "changed"}
    assert net([{"a": "changed"}, {"a": "deleted"}]) == {"a": "deleted"}


def _worker_children() -> list[int]:
    me, out = os.getpid(), []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rpartition(")")[2].split()[1]) == me and b"app.core.knowledge.workers" in cmd:
            out.append(int(pid))
    return out


def test_closing_mid_build_leaves_no_worker_behind(tmp_path):
    root = tmp_path / "big"
    generate_tree(root, 3000, commit=False)
    b = MapBuilder(root, cache=False, workers=2).start()
    for _ in range(3000):
        if _worker_children():
            break
        threading.Event().wait(0.005)
    b.close()
    assert not b._thread.is_alive()
    for _ in range(200):
        if not _worker_children():
            break
        threading.Event().wait(0.01)
    assert _worker_children() == []
    assert not b.status().complete and not b.current().complete  # nothing half-read published


def test_changes_since_says_when_a_fresh_map_is_needed(project, monkeypatch):
    import app.core.knowledge.builder as builder_module

    monkeypatch.setattr(builder_module, "HISTORY", 2)
    with built(project) as b:
        assert b.changes_since(1) is None  # version 1 was the paths-only map
        start = b.current().version
        versions = []
        for i in range(3):
            (project / f"added{i}.py").write_text(f"def added_{i}():\n    pass\n")
            b.update([f"added{i}.py"])
            assert b.wait(60)
            versions.append(b.current().version)
        assert b.changes_since(start) is None  # older than the history kept
        recent = b.changes_since(versions[0])
        assert recent is not None and recent.files == ("added1.py", "added2.py")
        assert b.changes_since(versions[0], budget=5) is None  # does not fit: send a map
