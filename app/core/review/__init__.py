"""The change set and the one writer of the user's tree (DESIGN rule 1).

- change_set.py: `ChangeSet`, a session's change sets: the pending diff, its review, the
  journal, the write lock and the arrival checks; subscribers hear what happens to the hunks.
- events.py: the events it publishes, who publishes each, and their order.
- review.py: `Review`, deciding on hunks: accept (whole, file, all, picked lines, edited),
  reject, resolve a conflict, undo; the live rebase's two steps.
- merge.py: the plan an accept makes, each file's 3-way merge onto the disk, the outcome.
"""
