"""Git and the working tree in step: the repository (status, staging, commits), the
files and badges the tree shows, the watcher, the live rebase, commit messages."""
