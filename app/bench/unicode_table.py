"""Writes app/core/text/invisible_table.py: the code points Unicode's properties call hidden
(app/core/text/invisible.py `code_points`, through the `regex` module's tables), as ranges.

    python -m app.bench.unicode_table        # after a `regex` upgrade (a new Unicode)

tests/test_invisible_set.py fails while the table differs from what `regex` derives.
"""

from __future__ import annotations

import sys
from pathlib import Path

from app.core.text import invisible

TABLE = Path(invisible.__file__).with_name("invisible_table.py")


def render() -> str:
    import regex

    found = invisible.code_points()
    hidden = invisible.ranges(set().union(*found.values()))
    bidi = invisible.ranges(found["Bidi_Control"])

    def rows(runs: tuple[tuple[int, int], ...]) -> str:
        return "".join(f"    (0x{a:05X}, 0x{b:05X}),\n" for a, b in runs)

    return (f'"""Written by `python -m app.bench.unicode_table` from the property tables of '
            f'regex {regex.__version__}\n(app/core/text/invisible.py says why); not edited by '
            f'hand."""\n\n'
            f"# {', '.join(invisible.PROPERTIES)}: (first, last) code points\n"
            f"HIDDEN = (\n{rows(hidden)})\n\n# Bidi_Control\nBIDI = (\n{rows(bidi)})\n")


def main() -> int:
    TABLE.write_text(render())
    print(f"wrote {TABLE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
