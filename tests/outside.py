"""Shared by the outside-text tests (DESIGN rule 12): hostile names, lines and prose, and
ways to read what the app put on its screen."""

from __future__ import annotations

import re

from invisible_oracle import holds_any

# a name a hostile repository can hold: it sets the window title, then paints red
TITLE_NAME = "t\x1b]2;PWNED\x07.txt"
RED_NAME = "red\x1b[31mX.txt"
SLUG = "app/[slug]/page.tsx"
# what an attacker's file, model or agent can write: OSC (title, clipboard), SGR, a clear,
# C1, bidi, zero-width, BOM, form feed, bare CR, BS, DEL, markup and an @click action
HOSTILE = ("a\x1b]2;PWNED\x07b \x1b]52;c;aGk=\x07 \x1b[31mred\x1b[0m \x1b[2J \x9b31m \u202eevil\u202c "
           "z\u200bw \ufeffbom f\x0cf c\rr b\x08s d\x7fl [b]bold[/b] [/] [@click=app.quit]CLICK-HERE[/]")
WIDE = "漢字テスト 👨\u200d👩\u200d👧 ❤\ufe0f e\u0301\u0301 ｆｕｌｌ"
# only Textual's own styling may reach the terminal: 256-colour and truecolor, bold, dim,
# italic, underline, reverse, strike, and their resets (never blink, never the 8 basic colours)
SGR_OK = re.compile(r"^(0|1|2|3|4|7|9|21|22|23|24|27|29|39|49|[34]8;5;\d+|[34]8;2;\d+;\d+;\d+)$")


def screen_lines(app) -> list[str]:
    """Every row the app draws now (the top screen, toasts included), as text."""
    return ["".join(seg.text for seg in strip) for strip in app.screen._compositor.render_strips()]


def obeyable(lines: list[str]) -> list[str]:
    """The rows holding a character a terminal would obey or could not draw."""
    return [line for line in lines if holds_any(line) or re.search("[\ud800-\udfff]", line)]


def sgr_problems(captured: str) -> list[str]:
    """Escape sequences in `tmux capture-pane -e` output that Textual does not write: a CSI
    other than SGR, or an SGR parameter outside SGR_OK."""
    bad = []
    for m in re.finditer(r"\x1b(\[[0-9;:]*[A-Za-z]|.)", captured):
        seq = m.group(1)
        if not (seq.startswith("[") and seq.endswith("m")):
            bad.append(m.group())
            continue
        params = seq[1:-1] or "0"
        i, parts = 0, params.split(";")
        while i < len(parts):  # 38;5;n and 38;2;r;g;b are one parameter each
            p = parts[i]
            if p in ("38", "48") and i + 1 < len(parts):
                n = 3 if parts[i + 1] == "5" else 5
                p = ";".join(parts[i:i + n])
                i += n
            else:
                i += 1
            if not SGR_OK.match(p):
                bad.append(m.group())
    return bad
