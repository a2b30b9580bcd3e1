"""`steer run` on files whose names carry brackets, parentheses, spaces or non-ASCII letters
(Next.js `lib/[id].ts`, `app/[slug]/page.tsx`, `a (copy).py`): a block for such a file edits
that file (it used to go to the file named before it and be refused, exit 4), in every edit
format, and the printed diff is one `git apply` takes. The real CLI in a subprocess, a real
git repository, a real loopback server replaying the answer."""

from __future__ import annotations

import shutil

import pytest
from conftest import SRC, git, init_repo
from render_answers import RENDERERS
from test_cli import served, steer

NAMES = ["lib/[id].ts", "app/[slug]/page.tsx", "a (copy).py", "my notes/to do.md", "données/été.py"]
BODY = "".join(f"row {i}\n" for i in range(1, 9))


@pytest.mark.parametrize("fmt", ["search_replace", "apply_patch", "whole"])
def test_blocks_for_odd_names_edit_those_files_and_the_diff_applies(tmp_path, fmt):
    repo = init_repo(tmp_path / "r", {"f.txt": SRC, **{n: BODY for n in NAMES}})
    # f.txt is in the context, the odd names are not: the parser must read them off the answer
    answer = RENDERERS[fmt]("f.txt", SRC.splitlines(), SRC.replace("line 3", "line three").splitlines())
    want = {}
    for i, name in enumerate(NAMES):
        new = BODY.replace(f"row {i + 2}\n", f"row {i + 2} edited\n")
        answer += RENDERERS[fmt](name, BODY.splitlines(), new.splitlines())
        want[name] = new
    with served(answer) as server:
        out = steer(repo, "run", "edit them", "-f", "f.txt", "--base-url", server.base_url,
                    "--model", "replay", "--format", fmt, "--accept", "all")
    assert out.returncode == 0, out.stderr
    assert "edit refused" not in out.stderr
    assert (repo / "f.txt").read_text() == SRC.replace("line 3", "line three")
    for name, new in want.items():
        assert (repo / name).read_text() == new, name
    # the printed diff, on a pipe, is a patch git takes for these names
    copy = tmp_path / "copy"
    shutil.copytree(repo, copy)
    git(copy, "checkout", "--", ".")
    (tmp_path / "p.diff").write_text(out.stdout)
    git(copy, "apply", str(tmp_path / "p.diff"))
    for name, new in want.items():
        assert (copy / name).read_text() == new, name
