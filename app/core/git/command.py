"""Running git: the one wrapper every git command of steer's goes through (the repository,
app/core/git/repository.py, and the check's worktrees, app/core/variants/worktrees.py).
Finding the repository is app/core/disk/git_dirs.py's; running git in it is this module's.

- The C locale (LANGUAGE, LC_ALL), as gitpython runs git: output is parsed, and a message
  reads the same on every machine.
- stdin is the bytes given, else /dev/null: git never waits on a terminal.
- `isolated`: the variables that point git at a repository (GIT_DIR, GIT_INDEX_FILE, ...)
  are dropped, so a command run in a folder works on that folder's repository and no other.
  The check needs this: its `git worktree add` under a hook's GIT_INDEX_FILE would write
  the user's index. Commands for the workspace keep the environment steer was started with.
- `check`: a failure raises GitError with git's own message, made readable.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from typing import NamedTuple

# Variables that would point git (and a check command's git) at the user's repository.
GIT_ENV_DROP = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_PREFIX")


class GitError(RuntimeError):
    """git refused or failed; the message is git's own, made readable."""


class Ran(NamedTuple):
    status: int
    out: bytes
    err: str


def without_repo_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """`env` (default: this process's) without the variables that name a repository."""
    return {k: v for k, v in (os.environ if env is None else env).items() if k not in GIT_ENV_DROP}


def run_git(cwd: str | os.PathLike[str], args: Sequence[str], *, options: Sequence[str] = (),
            stdin: bytes | None = None, isolated: bool = False, check: bool = True,
            timeout: float | None = None) -> Ran:
    """`git options args` in the folder `cwd`: (status, stdout bytes, stderr text). `options`
    are git's own (`--no-optional-locks`, `-c name=value`), before the command `args[0]`.
    `timeout`: seconds after which git is killed (subprocess.TimeoutExpired). OSError: no git."""
    env = without_repo_env() if isolated else dict(os.environ)
    env["LANGUAGE"] = env["LC_ALL"] = "C"
    proc = subprocess.run(["git", *options, *args], cwd=cwd, env=env, input=stdin,
                          stdin=subprocess.DEVNULL if stdin is None else None,
                          capture_output=True, timeout=timeout)
    err = proc.stderr.decode("utf-8", "replace")
    if check and proc.returncode != 0:
        raise GitError(readable(err or proc.stdout.decode("utf-8", "replace")) or
                       f"git {args[0]} failed ({proc.returncode})")
    return Ran(proc.returncode, proc.stdout, err)


def readable(err: str) -> str:
    """git's error text on one line: its first lines, without `error:` and `fatal:`."""
    lines = [t.strip() for t in err.strip().splitlines() if t.strip()]
    return "; ".join(t.removeprefix("error: ").removeprefix("fatal: ") for t in lines[:6])
