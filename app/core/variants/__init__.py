"""Parallel variants: one instruction answered N times at once, each answer streaming into a
change set of its own, reviewed side by side; hunks are taken from any of them, and a check
command run in throwaway git worktrees can pick one."""
