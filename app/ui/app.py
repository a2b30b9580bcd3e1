"""The app shell: settings, themes, key map and screens. The work happens on the main
screen (app/ui/main_screen.py), which drives the session built here."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from functools import partial
from pathlib import Path

from textual.app import App, SystemCommand
from textual.screen import Screen

from app.config import DEFAULT_THEME, Settings, config_file_shown, project_rules
from app.core.conversation.resume import open_saved
from app.core.conversation.session import Session
from app.core.disk.state_home import StateUnusable
from app.core.disk.workspace import Workspace
from app.core.edits.hunks import OPEN
from app.core.knowledge.service import Knowledge
from app.core.provider import Provider
from app.core.text.plural import plural
from app.core.variants.check import CheckCommand
from app.core.variants.group import Variants
from app.ui import actions, compat
from app.ui.dialogs.help import HelpScreen
from app.ui.dialogs.questions import ConfirmScreen
from app.ui.main_screen import MainScreen
from app.ui.palette import Entry, SteerCommands, textual_extras
from app.ui.plain_toasts import PlainToasts
from app.ui.themes import THEME_DEFAULTS, load_themes, remember_theme, remembered_theme, stylesheet
from app.ui.variant_set import VariantBackends
from app.view import outside_text
from app.view.welcome import ModelFacts, welcome


class SteerApp(PlainToasts, App):  # every toast plain text: app/ui/plain_toasts.py
    CSS_PATH = str(stylesheet())
    TITLE = "steer"
    BINDINGS = actions.bindings("app")  # every binding comes from the action table (app/ui/actions.py)
    COMMANDS = {SteerCommands}  # the palette: the action table's entries, with their keys

    def __init__(self, root: Path, provider: Provider, settings: Settings | None = None, *,
                 context: Iterable[str] = (), watch_files: bool = True, blink: bool = True,
                 saving: dict | None = None, knowledge: Knowledge | None = None,
                 ask: VariantBackends | None = None) -> None:
        super().__init__()
        compat.guard_pastes()  # a paste holding ESC stays a paste (never key presses)
        self.settings = settings or Settings()
        self.ws = Workspace(root)
        self.session = Session(self.ws, provider, fmt=self.settings.format,
                               max_tokens=self.settings.max_tokens,
                               temperature=self.settings.temperature)
        self.session.rules = project_rules(self.settings, self.ws)
        # the repository map and look-ups (app/core/knowledge/service.py): started on mount
        self.session.knowledge = knowledge
        # saved (app/core/storage/log.py): `saving` is open_saved's choice (resume or new)
        self.resumed = None
        self._unsaved = ""  # why this session cannot be saved (its folder): said at start
        try:
            self.resumed = None if saving is None else open_saved(self.session, **saving)
        except StateUnusable as exc:
            self._unsaved = f"{exc}; this session is not saved"
        # the first screen teaches; a resumed session that has turns shows them instead
        first = None if self.session.turns else welcome(
            ModelFacts.of(provider), {a: actions.pretty_keys(k, first=True)
                                      for a, k in self.key_names.items()}, config_file_shown())
        # the variants of one instruction (app/core/variants): the screen shows one at a time
        self.variants = Variants(self.session)
        self.main = MainScreen(self.variants, context=context, watch_files=watch_files, blink=blink,
                               welcome=first, keys=self.key_names, ask=ask,
                               check=CheckCommand(self.settings.check, self.settings.check_timeout,
                                                  self.settings.check_sandbox))
        self.main.default_variants = self.settings.variants
        if knowledge is not None:  # the map follows the watcher's events (the LiveTree's)
            self.main.live.updates.subscribe(knowledge.saw_update)
        themes, self._theme_problems = load_themes()
        self.theme_names = [t.name for t in themes]
        for t in themes:
            self.register_theme(t)
        wanted = self.settings.theme
        if wanted == DEFAULT_THEME:  # not chosen in the settings: the one last picked, if any
            wanted = remembered_theme() or DEFAULT_THEME
        self.theme = wanted if wanted in self.theme_names else DEFAULT_THEME

    def get_default_screen(self) -> Screen:
        return self.main

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(THEME_DEFAULTS)  # Textual's own themes get the default theme's (themes.py)

    def on_mount(self) -> None:
        if self.session.knowledge is not None:  # after launch: builds beside the first paint
            self.session.knowledge.start()
        if self.settings.keys:
            self.set_keymap(self.settings.keys)
        for problem in self._theme_problems:
            self.notify(problem, severity="warning")
        if self._unsaved:
            self.notify(self._unsaved, severity="warning", timeout=10)
        if self.resumed is not None:
            r = self.resumed
            moved = f"; rebased onto your edits: {', '.join(r.moved)}" if r.moved else ""
            cut = "; the last answer was cut short: it is kept as interrupted" if r.cut else ""
            self.notify(f"resumed session {r.id} ({plural(r.turns, 'turn')}){moved}{cut}", timeout=6)

    async def on_unmount(self) -> None:
        if self.main.checker is not None:  # a check running: its worktree goes too
            await self.main.checker.aclose()
        await self.variants.aclose()
        if self.session.knowledge is not None:
            await asyncio.to_thread(self.session.knowledge.close)
        self.main.gc.release()

    # -- keys, themes, palette -------------------------------------------------------------
    @property
    def key_names(self) -> dict[str, str]:
        """action id -> the keys bound now (the help screen shows them)."""
        return actions.key_names(self.settings.keys)

    async def action_quit(self) -> None:
        """Quitting with hunks still open asks first, naming how many."""
        n = sum(1 for v in self.variants.items if v.session.pending is not None
                for h in v.session.pending.hunks if h.state in OPEN)
        if not n:
            self.exit()
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.exit()

        self.push_screen(ConfirmScreen(
            f"{n} hunk{'s are' if n != 1 else ' is'} still open. Quit anyway?",
            "Nothing of it is written; `steer --resume` brings it back." if self.session.log
            else "Nothing of it is written, and this session is not saved: it is lost."),
            callback=answered)

    def action_help(self) -> None:
        """The help, over whatever is open (a dialog too: closing the help goes back to it,
        the focus where it was); from the help itself, the key closes it."""
        if isinstance(self.screen, HelpScreen):
            self.screen.dismiss()
        else:
            self.push_screen(HelpScreen(self.key_names))

    def action_next_theme(self) -> None:
        names = self.theme_names
        self.theme = names[(names.index(self.theme) + 1) % len(names)] if self.theme in names else DEFAULT_THEME
        self.notify(f"theme: {self.theme}", timeout=2)

    def watch_theme(self, name: str) -> None:
        if self.is_running:
            remember_theme(name)

    def palette_entries(self, screen: Screen) -> Iterable[Entry]:
        """The command palette (app/ui/palette.py): one entry per action, with its key."""
        keys = self.key_names
        if isinstance(screen, MainScreen):
            for a, run in screen.palette_actions():
                yield Entry(a.palette or a.label, a.help, run, actions.pretty_keys(keys.get(a.id, "")))
        for name in self.theme_names:
            yield Entry(f"Theme: {outside_text.name(name)}", "switch to this theme (remembered)",
                        partial(setattr, self, "theme", name))
        yield from textual_extras(super().get_system_commands(screen))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        for e in self.palette_entries(screen):
            yield SystemCommand(e.title, e.help, e.run)
