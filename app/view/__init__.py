"""Presentation without Textual: what the screen and `steer run` show, as plain data and text.

Both front-ends read the session through this floor, so a figure or a label reads the same
in the terminal app, in `steer run`'s live status line and in its JSON report.
"""
