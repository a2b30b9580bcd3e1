"""Each fact once: the default theme's name, the values a theme leaves out (the diff colours,
the syntax fallback), the way git is run, and what a provider name means. A second copy
coming back fails here, naming the module it came back in."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import app
from app.config import DEFAULT_THEME
from app.ui.themes import SYNTAX_FALLBACK, THEME_DEFAULTS

APP = Path(app.__file__).parent
# the widgets' own branch (stream_view, diff_view) moves their fallbacks to SYNTAX_FALLBACK;
# until it lands, their copies of it are the only ones allowed


@functools.cache
def _modules() -> dict[str, ast.Module]:
    return {str(p.relative_to(APP)): ast.parse(p.read_text()) for p in sorted(APP.rglob("*.py"))}


def _strings(tree: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def test_the_default_theme_is_named_once():
    where = [m for m, tree in _modules().items() if DEFAULT_THEME in _strings(tree)]
    assert where == ["config.py"]


def test_what_a_theme_leaves_out_is_written_only_in_the_default_theme():
    assert THEME_DEFAULTS["syntax"] == SYNTAX_FALLBACK and {"diff-added-bg", "diff-removed-bg"} <= set(THEME_DEFAULTS)
    for module, tree in _modules().items():
        written = set(THEME_DEFAULTS.values()) & set(_strings(tree))
        assert not written, f"{module} writes {sorted(written)}: use app.ui.themes.THEME_DEFAULTS"


SPAWNS = {"run", "Popen", "call", "check_call", "check_output", "create_subprocess_exec"}


def _runs_git(tree: ast.AST) -> bool:
    """Whether the module starts git itself (subprocess, asyncio) or through gitpython
    (`….git.execute`, `repo.git.<command>`)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) \
                and node.value.attr == "git" and (node.attr == "execute" or ast.unparse(
                    node.value.value).endswith("repo")):
            return True
        if not (isinstance(node, ast.Call) and node.args and isinstance(node.func, ast.Attribute)
                and node.func.attr in SPAWNS):
            continue
        first = node.args[0]
        if isinstance(first, (ast.List, ast.Tuple)) and first.elts:
            first = first.elts[0]
        if isinstance(first, ast.Constant) and first.value == "git":
            return True
    return False


def test_git_runs_through_one_wrapper():
    # app/bench builds its fixture repositories with git directly: dev tools, not steer
    where = [m for m, tree in _modules().items() if _runs_git(tree) and not m.startswith("bench/")]
    assert where == ["core/git/command.py"]


def test_a_provider_name_is_resolved_in_one_module():
    # the preset table is data (config.py); deciding what a name means is resolve.py's, and
    # the welcome only shows one preset's key variable as an example
    readers = []
    for module, tree in _modules().items():
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        names |= {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        if "PRESETS" in names:
            readers.append(module)
        if module != "providers/resolve.py":
            defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
            assert not defined & {"provider_name", "base_url_of", "key_env_of",
                                  "variant_settings"}, module
    assert readers == ["config.py", "providers/resolve.py", "view/welcome.py"]
