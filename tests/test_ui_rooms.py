"""The shape of app/ui, kept: a main screen that only routes, rooms a newcomer can name, the
review's keys as rows of the action table, messages as dataclasses, and no engine work
(subprocesses, temp files, the write lock) in the UI. The import-linter contracts keep the
imports (ui's rooms in layers, no pane importing another); these keep the rest."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import pkgutil
from pathlib import Path

from textual.message import Message

import app.ui
from app.ui import actions
from app.ui.main_screen import MainScreen
from app.ui.panes.review import ReviewPane

UI = Path(app.ui.__file__).parent


def _modules() -> list[Path]:
    return sorted(UI.rglob("*.py"))


def test_rooms_are_small_and_say_what_they_hold():
    for folder in [UI, *(p for p in UI.iterdir() if p.is_dir() and (p / "__init__.py").exists())]:
        modules = list(folder.glob("*.py"))
        assert len(modules) <= 15, folder
        doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text()))
        assert doc and len(doc.splitlines()) == 2, folder  # two lines: what the room holds
    for path in _modules():
        assert len(path.read_text().splitlines()) <= 600, path
    assert len((UI / "main_screen.py").read_text().splitlines()) <= 400


def test_a_review_key_is_a_row_of_the_table_and_a_method_of_the_review():
    rows = [a for a in actions.ACTIONS if a.scope == "review"]
    assert {b.id for b in ReviewPane.BINDINGS} == {a.id for a in rows if a.keys}
    for a in rows:
        target, _, name = a.run.rpartition(".")
        owner = {"screen": MainScreen, "": ReviewPane}[target]
        assert callable(getattr(owner, f"action_{name}", None)), a.id


def test_every_message_of_the_ui_is_a_dataclass():
    found = []
    for info in pkgutil.walk_packages(app.ui.__path__, "app.ui."):
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            for owner in (cls, *(c for _, c in inspect.getmembers(cls, inspect.isclass))):
                if (issubclass(owner, Message) and owner.__module__ == info.name
                        and owner is not Message):
                    found.append(owner)
                    assert dataclasses.is_dataclass(owner), owner.__qualname__
    assert len(found) >= 15  # the panes' and widgets' messages were all seen


def test_the_ui_runs_no_process_writes_no_temp_file_and_takes_no_lock():
    for path in _modules():
        tree = ast.parse(path.read_text())
        imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                    if isinstance(node, ast.Import) for alias in node.names}
        imported |= {(node.module or "").split(".")[0] for node in ast.walk(tree)
                     if isinstance(node, ast.ImportFrom)}
        assert not imported & {"subprocess", "tempfile", "shlex"}, path
        held = [ast.unparse(item.context_expr) for node in ast.walk(tree)
                if isinstance(node, ast.With | ast.AsyncWith) for item in node.items]
        assert not [h for h in held if "lock" in h.lower()], (path, held)
