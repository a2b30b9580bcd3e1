"""The main screen's panes, each owning its behaviour: the composer (prompt, queue, context), the
review (cursor, decisions, git), the conversation (answer, cards, queue shown), the files (tree, live sync)."""
