"""The engine. Nothing in here imports Textual: the TUI, `steer run` and the tests drive it alike."""
