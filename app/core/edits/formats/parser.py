"""The streaming edit parser: reads whichever edit format the model actually wrote.

The prompt asks for one format, but models drift (and small ones drift a lot), so the parser
recognises all three, line by line:

- apply_patch: `*** Begin Patch` ... `*** End Patch` (delegated to ApplyPatchParser);
- search/replace blocks, as aider popularised them:

      path/to/file.py
      ```python
      <<<<<<< SEARCH
      old lines
      =======
      new lines
      >>>>>>> REPLACE
      ```

  The file name is the line before the fence (or before the SEARCH marker, or in the
  fence's info string); a block without one reuses the previous block's file. An empty
  SEARCH creates the file, or appends to it.
- whole files: a path line, then a fenced block that does not start with a SEARCH marker.
  When the prompt asked for another format, such a block is still an edit (nothing that
  names a file is dropped as prose): it is held until its fence closes, since a SEARCH
  marker further down makes it a search/replace block after all, and then read as a whole
  file (app/core/edits/formats/fragments.py reads a snippet as the region it replaces).

Read as a careful reader would, not as the first marker says:
- a whole file may hold fenced blocks of its own (a README): a fence with an info string
  (```sh) opens a block inside the file and the next bare fence closes it, so the file is
  not cut at its first inner fence. A bare fence could still open a block inside the file
  or close the whole one; for documents (and files that showed inner fences) the parser
  looks past the close: if a bare fence follows before the next edit, both readings hold
  and the edit is refused with a message instead of guessed.
- a SEARCH/REPLACE block has exactly one `=======` divider. A second one (an RST or
  Markdown underline in the text) makes the split ambiguous: the edit is refused.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import PurePosixPath

from app.core.edits.formats.apply_patch import OUTSIDE as PATCH_DONE
from app.core.edits.formats.apply_patch import ApplyPatchParser
from app.core.edits.formats.base import FENCE, StreamParser
from app.core.edits.formats.events import (
    EditBegin,
    EditEnd,
    Line,
    Malformed,
    OldEnd,
    ParseEvent,
    Prose,
)
from app.core.edits.formats.inferred import Infer

SEARCH = re.compile(r"^\s*<{5,9} ?SEARCH\b.*$")
DIVIDER = re.compile(r"^\s*={5,9}\s*$")
REPLACE = re.compile(r"^\s*>{5,9} ?REPLACE\b.*$")

PROSE, PATCH, OLD, NEW, SKIP, OPENED, WHOLE, CODE, CLOSING, MIXED, BARE = range(11)
HOLD = 3  # prose lines held back: they may turn out to be a block's file name and fence
# files whose text is likely to hold fenced blocks of its own
DOCUMENTS = frozenset({".md", ".markdown", ".mdx", ".rst", ".txt", ".adoc", ".asciidoc", ".org",
                       ".rmd", ".qmd", ".ipynb"})
TWO_DIVIDERS = ("the block has a second ======= line (an underline in the text?), so where "
                "SEARCH ends is ambiguous; refused, nothing of it applied")


class EditParser(StreamParser):

    def __init__(self, known_paths: frozenset[str] = frozenset(), *, whole: bool = False,
                 exists: Callable[[str], bool] | None = None, infer: Infer | None = None) -> None:
        super().__init__(known_paths, exists)
        self.whole = whole
        # BARE: a fenced block that names no file, held whole until it closes, then offered
        # to `infer` (inferred.py): a context file's whole-file proposal, refused, or prose
        self.infer = infer
        self.bare: list[str] = []
        self.bare_info = ""
        self._bare_text: tuple[int, str] = (0, "")
        self.state = PROSE
        self.held: list[str] = []
        self.old_tail: list[str] = []  # the last lines of the SEARCH text being read
        self.last_path: str | None = None
        self.path = ""  # the file of the open fenced block
        self.fence = ""
        self.opened: list[str] = []  # path and fence lines, until we know what the block is
        self.in_fence = False  # SEARCH blocks inside a fence: its closing line is not prose
        self.nest: list[str] = []  # whole file: fences of blocks open inside it
        self.nested = False  # whole file: it showed fenced blocks of its own
        self.after: list[str] = []  # CLOSING: lines after a close that may not be one
        self.after_block: str | None = None  # CLOSING: fence of a prose block open there
        self.patch = ApplyPatchParser(known_paths, exists)
        self.mixed: list[str] = []  # MIXED: a code block after a file name, held (see above)
        self.mixed_opened: list[str] = []

    def tentative(self) -> str:
        if self.state == BARE:  # shown as it streams; joined per frame, not per chunk
            n, text = self._bare_text
            if n != len(self.bare):
                text = "".join(line + "\n" for line in self.bare)
                self._bare_text = (len(self.bare), text)
            return text + self._buf
        if self.state not in (PROSE, CODE):
            return ""  # an edit, or a fence whose kind is not known yet
        held = "".join(line + "\n" for line in self.held)
        return held + self._buf

    @property
    def in_edit(self) -> bool:
        return self.state in (OLD, NEW, WHOLE, MIXED) or (self.state == PATCH and self.patch.in_edit)

    # -- lines -----------------------------------------------------------------------------
    def _line(self, line: str, out: list[ParseEvent]) -> None:
        state = self.state
        if state == NEW:
            if REPLACE.match(line):
                out.append(EditEnd())
                self.state = PROSE
            elif SEARCH.match(line):
                out.append(EditEnd(False, "block without >>>>>>> REPLACE"))
                self.state = PROSE
                self._line(line, out)
            elif DIVIDER.match(line):
                out.append(EditEnd(False, TWO_DIVIDERS, refused=True))
                self.state = SKIP
            else:
                out.append(Line("+", line))
        elif state == OLD:
            if DIVIDER.match(line):
                out.append(OldEnd())
                self.state = NEW
            elif REPLACE.match(line) or SEARCH.match(line):
                out.append(EditEnd(False, "SEARCH block without a ======= divider"))
                self.state = PROSE
                if SEARCH.match(line):
                    # the next block starts here; its file name, if the model wrote one,
                    # went into this broken block's text: take it back from there
                    tail = [t for t in self.old_tail if t.strip()]
                    self.held = tail[-1:] if tail and self.looks_like_path(tail[-1]) else []
                    self._line(line, out)
            elif self.in_fence and self._closes(line):
                # the code block closed with no divider: this block is broken, and what
                # follows (a file name, another block) belongs to a fresh start
                out.append(EditEnd(False, "SEARCH block without a ======= divider (its code "
                                          "block closed first)"))
                self.state = PROSE
                self.in_fence = False
            else:
                out.append(Line("-", line))
                self.old_tail = [*self.old_tail[-HOLD:], line]
        elif state == WHOLE:
            self._whole_line(line, out)
        elif state == MIXED:
            self._mixed_line(line, out)
        elif state == BARE:
            self._bare_line(line, out)
        elif state == CLOSING:
            self._closing_line(line, out)
        elif state == PATCH:
            self.patch._line(line, out)
            if self.patch.state == PATCH_DONE:
                self.state = PROSE
        elif state == OPENED:  # a fence after a file name: SEARCH blocks, a whole file, or code
            opened, self.opened = self.opened, []
            if SEARCH.match(line):
                self.in_fence = True
                self._begin_block(self.path, out)
            elif line.strip() == "*** Begin Patch":  # a patch, not a file that starts so
                out.extend(Prose(t) for t in opened)
                self.state = CODE
                self._line(line, out)
            elif self.whole and not self._closes(line):
                out.append(EditBegin(self.path, "whole"))
                self.state = WHOLE
                self.nest, self.nested = [], False
                self._line(line, out)
            elif not self._closes(line):  # another format was asked for: held until it closes
                self.state, self.mixed, self.mixed_opened = MIXED, [], opened
                self.nest, self.nested = [], False
                self._line(line, out)
            else:
                out.extend(Prose(t) for t in opened)
                self.state = CODE
                self._line(line, out)
        elif state == SKIP:  # a block we could not attribute to a file: swallow it
            if REPLACE.match(line):
                self.state = PROSE
        elif state == CODE:
            if SEARCH.match(line):  # the file name may sit inside the fence, before the block
                self.in_fence = True
                self._search_from_held(out)
            elif line.strip() == "*** Begin Patch":  # a patch in a code block is a patch all the same
                self.in_fence = True
                self._flush(out)
                self.patch._line(line, out)
                self.state = PATCH
            elif self._closes(line):
                self._flush(out)
                out.append(Prose(line))
                self.state = PROSE
            else:
                self._hold(line, out)
        else:
            self._prose(line, out)

    def _prose(self, line: str, out: list[ParseEvent]) -> None:
        stripped = line.strip()
        if stripped == "*** Begin Patch":
            self._flush(out)
            self.patch._line(line, out)
            self.state = PATCH
            return
        if SEARCH.match(line):
            self._search_from_held(out)
            return
        m = FENCE.match(stripped)
        if m is None:
            self._hold(line, out)
            return
        if self.in_fence:  # the fence that closes a run of SEARCH/REPLACE blocks
            self.in_fence = False
            return
        self.fence = m["fence"]
        path, at = self._path_before()
        opened = [line]
        if path is not None:
            opened.insert(0, self.held[at])
            del self.held[at:]
        else:  # ```python path/to/file.py
            path = next((p for w in reversed(m["info"].split()) if (p := self.looks_like_path(w))), None)
        self._flush(out)
        if path is None and self.infer is not None:
            self.state, self.bare, self.bare_info, self.nest = BARE, [line], m["info"], []
        elif path is None:
            out.append(Prose(line))
            self.state = CODE
        else:
            self.path, self.opened, self.state = path, opened, OPENED

    # -- whole files: where does the block end? ---------------------------------------------
    def _whole_line(self, line: str, out: list[ParseEvent]) -> None:
        m = FENCE.match(line.strip())
        if m is None:
            out.append(Line("+", line))
            return
        run, info = m["fence"], m["info"].strip()
        if self.nest:  # inside a block of the file only its own closing fence counts
            top = self.nest[-1]
            if not info and run[0] == top[0] and len(run) >= len(top):
                self.nest.pop()
            out.append(Line("+", line))
            return
        if info or run[0] != self.fence[0] or len(run) < len(self.fence):
            # an opening with an info string, or a fence that cannot close ours: a block inside
            self.nest.append(run)
            self.nested = True
            out.append(Line("+", line))
            return
        if self.nested or PurePosixPath(self.path).suffix.lower() in DOCUMENTS:
            self.state, self.after, self.after_block = CLOSING, [], None  # look past it first
            return
        out.append(EditEnd())
        self.state = PROSE

    def _mixed_line(self, line: str, out: list[ParseEvent]) -> None:
        """A code block after a file name, in an answer asked for another format: a SEARCH
        marker (or a patch) makes it search/replace text (the lines before it are prose, as
        they always were); its closing fence makes it a whole file, read by the WHOLE rules
        from the top."""
        if SEARCH.match(line) or line.strip() == "*** Begin Patch":
            held, self.mixed = self.mixed, []
            out.extend(Prose(t) for t in self.mixed_opened)
            self.state = CODE
            self.last_path = self.path  # the block's file, unless the lines held name another
            for t in [*held, line]:
                self._line(t, out)
            return
        self.mixed.append(line)
        m = FENCE.match(line.strip())
        if m is None:
            return
        run, info = m["fence"], m["info"].strip()
        if self.nest:
            top = self.nest[-1]
            if not info and run[0] == top[0] and len(run) >= len(top):
                self.nest.pop()
        elif info or run[0] != self.fence[0] or len(run) < len(self.fence):
            self.nest.append(run)
        else:
            self._mixed_whole(out)

    def _mixed_whole(self, out: list[ParseEvent]) -> None:
        """The held block is a whole file: stream it as one (its last line may be the fence
        that closes it, read by the WHOLE rules as usual)."""
        held, self.mixed = self.mixed, []
        out.append(EditBegin(self.path, "whole"))
        self.state = WHOLE
        self.nest, self.nested = [], False
        for t in held:
            if self.state == WHOLE:
                self._whole_line(t, out)
            else:
                self._line(t, out)

    def _bare_line(self, line: str, out: list[ParseEvent]) -> None:
        """A fenced block that names no file: a SEARCH marker or a patch in it makes it a
        code block as before (read again from its fence); its closing fence hands it to
        `infer`."""
        if SEARCH.match(line) or line.strip() == "*** Begin Patch":
            return self._bare_as_code(out, line)
        m = FENCE.match(line.strip())
        if m is not None:
            run, info = m["fence"], m["info"].strip()
            if self.nest:
                top = self.nest[-1]
                if not info and run[0] == top[0] and len(run) >= len(top):
                    self.nest.pop()
            elif info or run[0] != self.fence[0] or len(run) < len(self.fence):
                self.nest.append(run)
            else:
                return self._bare_closed(out, line)
        self.bare.append(line)

    def _bare_as_code(self, out: list[ParseEvent], line: str | None) -> None:
        held, self.bare = self.bare, []
        self.state = CODE
        out.append(Prose(held[0]))
        for t in held[1:] + ([line] if line is not None else []):
            self._line(t, out)

    def _bare_closed(self, out: list[ParseEvent], fence: str | None) -> None:
        assert self.infer is not None
        body = self.bare[1:]
        got = self.infer(self.bare_info, body)
        if got.path is None:
            if got.note:
                out.append(Malformed(got.note))
            out.extend(Prose(t) for t in self.bare)
            if fence is not None:
                out.append(Prose(fence))
        else:
            out.append(EditBegin(got.path, "whole", inferred=got.note))
            out.extend(Line("+", t) for t in body)
            out.append(EditEnd())
        self.bare = []
        self.state = PROSE

    def _closing_line(self, line: str, out: list[ParseEvent]) -> None:
        """After a bare fence closed a document's block: the next edit, or the end, confirms
        the close; a bare fence opening a block first means it may have opened one in the file."""
        stripped = line.strip()
        m = FENCE.match(stripped)
        if self.after_block is not None:  # a code block in the prose after the file
            if m is not None and not m["info"].strip() and m["fence"][0] == self.after_block[0] \
                    and len(m["fence"]) >= len(self.after_block):
                self.after_block = None
            self.after.append(line)
            return
        if stripped == "*** Begin Patch" or SEARCH.match(line):
            return self._closed(out, line)
        if m is not None:
            before = next((t for t in reversed(self.after) if t.strip()), None)
            if before is not None and self.looks_like_path(before):
                return self._closed(out, line)  # the next file's block
            if m["info"].strip():
                self.after_block = m["fence"]
            else:
                fence = self.fence
                out.append(EditEnd(False, f"a {fence} line inside the file could end its code "
                                   f"block or open one in it, so where {self.path} ends is "
                                   f"ambiguous; refused (fence such a file with {fence[0] * (len(fence) + 1)})",
                                   refused=True))
                return self._closed(out, line, ended=True)
        self.after.append(line)

    def _closed(self, out: list[ParseEvent], line: str | None, ended: bool = False) -> None:
        """The whole-file block is over: read what was held after it (and `line`) as usual."""
        if not ended:
            out.append(EditEnd())
        self.state = PROSE
        after, self.after, self.after_block = self.after, [], None
        for t in after + ([line] if line is not None else []):
            self._line(t, out)

    # -- helpers ---------------------------------------------------------------------------
    def _hold(self, line: str, out: list[ParseEvent]) -> None:
        self.held.append(line)
        if len(self.held) > HOLD:
            out.append(Prose(self.held.pop(0)))

    def _path_before(self) -> tuple[str | None, int]:
        i = len(self.held) - 1
        while i >= 0 and not self.held[i].strip():
            i -= 1
        path = self.looks_like_path(self.held[i]) if i >= 0 else None
        return path, i

    def _flush(self, out: list[ParseEvent]) -> None:
        out.extend(Prose(t) for t in self.held)
        self.held = []

    def _closes(self, line: str) -> bool:
        s = line.strip()
        return len(s) >= len(self.fence) and s == s[0] * len(s) and s[0] == self.fence[0]

    def _search_from_held(self, out: list[ParseEvent]) -> None:
        path, at = self._path_before()
        if path is not None:
            del self.held[at:]
        self._flush(out)
        self._begin_block(path, out)

    def _begin_block(self, path: str | None, out: list[ParseEvent]) -> None:
        self.old_tail = []
        path = path or self.last_path
        if path is None:
            out.append(Malformed("a SEARCH/REPLACE block does not say which file it edits"))
            self.state = SKIP
            return
        self.last_path = path
        out.append(EditBegin(path, "update"))
        self.state = OLD

    def _end(self, out: list[ParseEvent], complete: bool) -> None:
        if self.state == MIXED:  # it never closed: a whole file all the same, cut short
            self._mixed_whole(out)
        if self.state == CLOSING:  # nothing after the close contradicted it
            self._closed(out, None)
        if self.state == BARE:  # a block the answer never closed: whole if the answer is
            if complete:
                self._bare_closed(out, None)
            else:  # cut short, it is what it was before: prose
                out.extend(Prose(t) for t in self.bare)
                self.bare, self.state = [], PROSE
        why = "the answer stopped" if not complete else "the answer ended"
        if self.state in (OLD, NEW):
            out.append(EditEnd(False, f"{why} inside a SEARCH/REPLACE block"))
        elif self.state == WHOLE and complete and self.nested:
            # the answer is whole but the block never closed: its inner fences were not paired
            # as they were read, and another reading would end the file elsewhere
            out.append(EditEnd(False, f"the fences inside the code block for {self.path} do not "
                               "pair up, so where the file ends is ambiguous; refused",
                               refused=True))
        elif self.state == WHOLE:
            out.append(EditEnd(False, f"{why} inside the code block for {self.path}"))
        elif self.state == PATCH:
            self.patch._end(out, complete)
        elif self.state == OPENED:
            out.extend(Prose(t) for t in self.opened)
        self._flush(out)
        self.state = PROSE
