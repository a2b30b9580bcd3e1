"""What the sub-commands share: exit codes, the parser that exits 2 with a short message,
the provider flags and the settings they make, the repository root, and reporting a
journal step."""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from typing import NoReturn, TextIO

from app.config import (  # noqa: F401 - ConfigError for the commands
    MAX_VARIANTS,
    ConfigError,
    load_settings,
    variant_count,
)
from app.core.edits.formats import CHOICES as FORMAT_CHOICES
from app.providers.resolve import PROVIDERS
from app.view.outside_text import Over

EXIT_OK, EXIT_USAGE, EXIT_PROVIDER, EXIT_EDITS = 0, 2, 3, 4


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse exits 2 too; keep the message short
        self.print_usage(sys.stderr)
        print(f"steer: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def provider_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model")
    g.add_argument("--provider", choices=PROVIDERS, help="back-end (default: local, or your config)")
    g.add_argument("--base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8080/v1")
    g.add_argument("--model", help="model name sent to the back-end")
    g.add_argument("--model-path", help="GGUF file for the local provider")
    g.add_argument("--format", choices=FORMAT_CHOICES, help="edit format the model is asked for (default auto)")
    g.add_argument("--max-tokens", type=int, help="cap on the answer's length")
    g.add_argument("--temperature", type=float)
    g.add_argument("--stall-timeout", type=float, help="seconds without data before giving up")
    g.add_argument("--agent", metavar="COMMAND",
                   help='run an ACP coding agent instead of a model, e.g. "codex-acp" or "gemini --acp"')
    g.add_argument("--variants", type=int, metavar="N",
                   help=f"answer each instruction N times at once (1 to {MAX_VARIANTS}; seeds 1..N)")
    g.add_argument("--variant-models", type=model_list, metavar="A,B,...",
                   help="one variant per model: a preset (cerebras), preset:model, or a model name")


def model_list(text: str) -> list[str]:
    """--variant-models: names separated by commas (spaces around them ignored)."""
    names = [n.strip() for n in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"an empty model name in {text!r}")
    return names


def settings_from(args: argparse.Namespace):
    """The settings of the provider flags over the config; the variants are checked here, so
    a bad count is a one-line error before anything starts (ConfigError)."""
    settings = load_settings(provider=args.provider, base_url=args.base_url, model=args.model,
                             model_path=args.model_path, format=args.format,
                             max_tokens=args.max_tokens, temperature=args.temperature,
                             stall_timeout=args.stall_timeout, agent=args.agent,
                             variants=getattr(args, "variants", None),
                             variant_models=getattr(args, "variant_models", None))
    variant_count(settings)
    return settings


def knowledge_for(settings, root, *, one_shot: bool = False):
    """The repository map and look-ups for `root` (not started), with the settings' budget;
    a file holding the configured API key is never shown to the model. `one_shot`: for
    `steer run` (it parses in its own process when that is quicker)."""
    import os
    from pathlib import Path

    from app.core.disk.state_home import StateUnusable, ensure
    from app.core.knowledge.cache import cache_dir
    from app.core.knowledge.service import Knowledge, Policy
    from app.providers.resolve import key_env_of

    key_env = key_env_of(settings)
    keys = [os.environ.get(k) or "" for k in {"STEER_API_KEY", key_env or ""} if k]
    policy = Policy(map_tokens=settings.map_tokens, tools=settings.tools,
                    tool_rounds=settings.tool_rounds, tool_tokens=settings.tool_tokens)
    try:
        cache: Path | bool = ensure(cache_dir(root), "the repository map's cache")
    except StateUnusable:  # the map is built each run instead (the sessions say why, once)
        cache = False
    return Knowledge(root, policy, key_values=[k for k in keys if k], cache=cache,
                     one_shot=one_shot)


def lenient_stdout() -> None:
    # an answer may hold text no encoding can write (a lone surrogate): show it escaped
    from app.view.outside_text import Shown

    out = sys.stdout
    while isinstance(out, Shown | Masked):  # the stream under steer's wrappers
        out = out.raw
    if isinstance(out, io.TextIOWrapper):  # (a StringIO in its place cannot be)
        with contextlib.suppress(AttributeError, ValueError):
            out.reconfigure(errors="backslashreplace")


class Masked(Over):
    """stdout or stderr with every key value steer knows masked as *** (the streamed answer,
    --json, agents' and servers' words: app/core/text/masking.py), also when a write cuts a
    key in two. `end` writes what was held back as the possible start of a key."""

    def __init__(self, raw: TextIO) -> None:
        from app.core.text.masking import StreamMask

        super().__init__(raw)
        self._mask = StreamMask()

    def write(self, text: str) -> int:
        self.raw.write(self._mask.feed(text))
        return len(text)

    def end(self) -> None:
        held = self._mask.end()
        if held:
            self.raw.write(held)
        self.raw.flush()


@contextlib.contextmanager
def masked_output():
    """stdout and stderr Masked while a sub-command runs, whatever they are."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = Masked(sys.stdout), Masked(sys.stderr)
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            if isinstance(stream, Masked):
                with contextlib.suppress(OSError, ValueError):
                    stream.end()
        sys.stdout, sys.stderr = saved


def finish_interrupted(ws) -> bool:
    """Complete a step this process left open (the journal's recovery); report it. True when
    there was one."""
    from app.core.disk.journal import Journal

    try:
        done = Journal.for_workspace(ws).recover(ws)
    except Exception as exc:  # the next steer command completes it; say so
        print(f"steer: the interrupted write is not complete ({exc}); any steer command that "
              "writes, or `steer undo`, completes it", file=sys.stderr)
        return True
    for e in done:
        report_step(e, "completed an interrupted step: ")
    return bool(done)


def report_step(entry, prefix: str = "") -> None:
    verb = "reverted" if entry.op == "undo" else "wrote"
    print(f"steer: {prefix}{entry.label} ({verb} {', '.join(entry.written) or 'no file'})",
          file=sys.stderr)
    for note in entry.notes:
        print(f"steer: {note}", file=sys.stderr)


# sub-commands whose output quotes outside text (answers, paths, instructions, servers'
# errors): on a terminal it is shown, never obeyed
SHOWN = frozenset({"run", "undo", "sessions", "rewind", "doctor"})


@contextlib.contextmanager
def shown_on_terminals():
    """stdout and stderr pass the boundary for outside text while they are terminals; on a
    pipe or a file they carry the bytes as they are (a diff stays a byte-exact patch)."""
    from app.view.outside_text import Shown

    saved = sys.stdout, sys.stderr
    if sys.stdout.isatty():
        sys.stdout = Shown(sys.stdout)
    if sys.stderr.isatty():
        sys.stderr = Shown(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


