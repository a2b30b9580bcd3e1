"""A conversation about a change set: turns, prompts, agents, the review of its hunks,
and its saved log (records, resume, rewind)."""
