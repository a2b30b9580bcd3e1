"""Edits as they stream: the parsers of the three formats, the pending diff with its
hunks, and the rebase of those hunks onto the disk as it is now."""
