"""`steer [PATH]`: the full-screen app."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from app.cli.common import (
    EXIT_OK,
    EXIT_USAGE,
    ConfigError,
    Parser,
    knowledge_for,
    provider_flags,
    settings_from,
)
from app.core.disk.git_dirs import find_root


# -- steer [PATH]: the app ----------------------------------------------------------------------
def cmd_tui(argv: list[str]) -> int:
    p = Parser(prog="steer", description="Pair-program with a language model, live.",
                epilog="sub-commands: run, serve, undo, sessions, rewind, web, bench, doctor "
                       "(steer run --help); steer doctor checks this machine")
    p.add_argument("path", nargs="?", default=".", help="the workspace (default: here)")
    p.add_argument("-f", "--file", dest="files", action="append", default=[], metavar="PATH")
    p.add_argument("--resume", nargs="?", const="", metavar="ID",
                   help="resume the last saved session, or this one (steer sessions lists them)")
    p.add_argument("--session", metavar="ID", help=argparse.SUPPRESS)  # steer web: resume or new
    p.add_argument("--no-save", action="store_true", help="do not save this session")
    p.add_argument("--check", metavar="CMD", help="check every finished proposal with CMD in a "
                   "throwaway git worktree before you accept it (F sends a failure back; ! checks "
                   "again, or checks each variant); CMD runs the proposal's code (config: check)")
    p.add_argument("--no-tools", action="store_true", help="do not let the model read, grep or "
                   "list files itself (config: tools = false)")
    p.add_argument("--no-rules", action="store_true", help="do not send the project's AGENTS.md "
                   "(or CLAUDE.md...) and your own with each request (config: rules = false)")
    provider_flags(p)
    args = p.parse_args(argv)
    start = Path(args.path).resolve()
    if not start.is_dir():
        print(f"steer: {args.path} is not a directory", file=sys.stderr)
        return EXIT_USAGE
    root = find_root(start)
    try:
        settings = settings_from(args)
        if args.no_tools:
            settings = settings.model_copy(update={"tools": False})
        if args.no_rules:
            settings = settings.model_copy(update={"rules": False})
        from app.providers.factory import build_provider

        provider = build_provider(settings, cwd=root)
        if args.check:
            settings = settings.model_copy(update={"check": args.check})
        ask = _variant_backends(settings, root)
    except ConfigError as exc:
        print(f"steer: {exc}", file=sys.stderr)
        return EXIT_USAGE
    from app.core.storage.records import SessionError
    from app.ui.app import SteerApp

    context = [os.path.relpath((Path.cwd() / f).resolve(), root) for f in args.files]
    saving = None if args.no_save else {"resume_it": args.resume is not None,
                                        "sid": args.resume or args.session}
    try:
        app = SteerApp(root, provider, settings, context=context, saving=saving,
                       knowledge=knowledge_for(settings, root), ask=ask)
    except SessionError as exc:
        print(f"steer: {exc}", file=sys.stderr)
        return EXIT_USAGE
    app.run()
    return EXIT_OK


def _variant_backends(settings, root):
    """What the app asks a set of N variants with: fresh back-ends from the same settings
    (--variant-models: theirs, variant 1's too), nothing connected before its request."""
    from app.providers.factory import build_variant_providers

    def ask(n: int):
        if settings.variant_models:  # the models named decide how many
            providers = build_variant_providers(settings, cwd=root)
            return providers[0], providers[1:]
        providers = build_variant_providers(settings.model_copy(update={"variants": n}), cwd=root)
        return None, providers[1:]  # variant 1 is the session's own back-end

    return ask
