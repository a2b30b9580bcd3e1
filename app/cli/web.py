"""`steer web`: the same app in a browser tab, served by textual-serve.

Each tab runs a real `steer` process (the web driver instead of a terminal) on one saved
session, so every key works as in the terminal, a reloaded tab comes back to the same
session (resumed from its log, app/core/storage/log.py), and `steer --resume ID` opens it in a
terminal later. textual-serve has no authentication: a random token in the printed URL is
checked on every request (a cookie carries it after the first page, so the page's own
script, styles and WebSocket need no token in their URLs), the WebSocket also checks its
Origin, and the server listens on 127.0.0.1 unless `--host` says otherwise. The page is our
own copy of textual-serve's template: everything it loads, the font included, comes from
the same address (textual-serve's page fetches its font from Google).
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import secrets
import shlex
import signal
import socket
import sys
from pathlib import Path
from urllib.parse import urlsplit

COOKIE = "steer_token"


def make_server(command: str, token: str, *, title: str = "steer"):
    """A textual-serve Server that refuses every request without the token (403)."""
    from aiohttp import web
    from textual_serve.server import Server

    class Guarded(Server):
        async def _make_app(self) -> web.Application:
            app = await super()._make_app()
            app.middlewares.append(self.guard)
            return app

        @web.middleware
        async def guard(self, request: web.Request, handler):
            given = request.query.get("token") or request.cookies.get(COOKIE) or ""
            if not secrets.compare_digest(given.encode(), token.encode()):
                raise web.HTTPForbidden(text="steer web: this address needs the token it was "
                                             "printed with\n")
            origin = request.headers.get("Origin")
            if request.path == "/ws" and origin and urlsplit(origin).netloc != request.host:
                raise web.HTTPForbidden(text="steer web: a page of another site cannot drive "
                                             "this session\n")
            response = await handler(request)
            if request.path == "/" and request.query.get("token"):
                response.set_cookie(COOKIE, token, httponly=True, samesite="Strict")
            return response

        async def handle_index(self, request: web.Request):
            # the page's script connects back to the address the browser used
            self.public_url = f"{request.scheme}://{request.host}"
            return await super().handle_index(request)

        async def on_startup(self, app: web.Application) -> None:
            pass  # stdout carries the URL only

        def initialize_logging(self) -> None:
            import logging

            logging.basicConfig(level="WARNING", stream=sys.stderr, format="steer web: %(message)s")

    return Guarded(command, title=title, templates_path=page_templates())


def page_templates() -> Path:
    """Our copy of textual-serve's page template (themes/web/app_index.html): the same page,
    except that its font is served from here instead of fonts.googleapis.com, so the tab makes
    no request off this machine. textual-serve's own static folder (script, styles, the font
    file) is served as it is."""
    from importlib.resources import files

    return Path(str(files("app.themes").joinpath("web")))


def _parser() -> argparse.ArgumentParser:
    from app.cli.common import Parser as _Parser

    p = _Parser(prog="steer web", description="Serve the app to a browser tab on this machine. "
                "Other options (--base-url, --model, -f...) are passed to the app.")
    p.add_argument("path", nargs="?", default=".", help="the workspace (default: here)")
    p.add_argument("--host", default="127.0.0.1",
                   help="interface to listen on (default 127.0.0.1; another one exposes the "
                        "session to that network, token or not)")
    p.add_argument("--port", type=int, default=8000, help="port (0 picks a free one)")
    p.add_argument("--resume", nargs="?", const="", metavar="ID",
                   help="serve the last saved session, or this one")
    return p


def main(argv: list[str]) -> int:
    from app.cli.common import EXIT_OK, EXIT_USAGE
    from app.core.disk.git_dirs import find_root
    from app.core.storage.records import SessionError
    from app.core.storage.store import SessionStore, new_id

    args, rest = _parser().parse_known_args(argv)
    start = Path(args.path).resolve()
    if not start.is_dir():
        print(f"steer: {args.path} is not a directory", file=sys.stderr)
        return EXIT_USAGE
    root = find_root(start)
    store = SessionStore(root)
    try:
        sid = store.resolve(args.resume or None) if args.resume is not None else new_id()
    except SessionError as exc:
        print(f"steer: {exc}", file=sys.stderr)
        return EXIT_USAGE
    token = secrets.token_urlsafe(24)
    command = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "app", str(root),
                                                "--session", sid, *rest])
    try:
        sock = socket.create_server((args.host, args.port),
                                    family=socket.AF_INET6 if ":" in args.host else socket.AF_INET)
    except OSError as exc:
        print(f"steer: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}",
              file=sys.stderr)
        return EXIT_USAGE
    port = sock.getsockname()[1]
    if not _loopback(args.host):
        print(f"steer web: listening on {args.host}: other machines can reach this session; "
              "whoever has the URL with its token drives the app (your files, your keys)",
              file=sys.stderr, flush=True)
    shown = args.host if not _any_address(args.host) else "127.0.0.1"
    shown = f"[{shown}]" if ":" in shown else shown
    print(f"steer web: session {sid} at http://{shown}:{port}/?token={token}", flush=True)
    server = make_server(command, token, title=f"steer · {root.name}")
    return _serve(server, sock) or EXIT_OK


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _any_address(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def _serve(server, sock: socket.socket) -> int:
    from aiohttp import web
    from aiohttp.web_runner import GracefulExit

    server.initialize_logging()
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)

    def stop() -> None:
        raise GracefulExit()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop)
    web.run_app(server._make_app(), sock=sock, handle_signals=False, loop=loop,
                print=lambda *a: None)
    return 0
