"""`steer` and its sub-commands: (the app), run, serve, undo, sessions, rewind, web, bench,
doctor. Each sub-command is a module of this package; what they share is in common.py."""

from __future__ import annotations

import sys
from collections.abc import Callable
from importlib import import_module

from app import launch_gc

# sub-command -> (module, function), imported when used: `steer run` never loads Textual
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("app.cli.run", "cmd_run"), "undo": ("app.cli.undo", "cmd_undo"),
    "sessions": ("app.cli.sessions", "cmd_sessions"), "rewind": ("app.cli.sessions", "cmd_rewind"),
    "doctor": ("app.cli.doctor", "cmd_doctor"), "web": ("app.cli.web", "main"),
    "serve": ("app.server.chat_server", "main"), "bench": ("app.bench", "main"),
}


def command(name: str) -> Callable[[list[str]], int]:
    module, function = COMMANDS[name]
    return getattr(import_module(module), function)


def main(argv: list[str] | None = None) -> int:
    launch_gc.begin()  # until the start-up is over (app/launch_gc.py)
    try:
        return _main(argv)
    finally:
        launch_gc.launched()  # (a command that did not say so: at its end)


def _main(argv: list[str] | None) -> int:
    from app.cli.common import EXIT_OK, SHOWN, masked_output, shown_on_terminals

    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in COMMANDS and argv[0] != "run":
        launch_gc.launched()  # only `steer run` and the app say when their start-up is over
    if argv and argv[0] in COMMANDS:
        with masked_output():  # under the boundary for outside text: steer's own sequences
            if argv[0] in SHOWN:  # (the live status) are masked too
                with shown_on_terminals():
                    return command(argv[0])(argv[1:])
            return command(argv[0])(argv[1:])
    if argv and argv[0] in ("-V", "--version"):
        from app import __version__

        print(f"steer {__version__}")
        return EXIT_OK
    from app.cli.tui import cmd_tui

    return cmd_tui(argv)
