"""The disk: workspace paths and their safety, compare-and-swap writes, base snapshots,
and the journal that makes every accept and undo survive a kill."""
