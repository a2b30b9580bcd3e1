"""A commit message proposed by the model, for the user to edit before committing.

A short, separate request to the same provider the session uses (the staged diff in, one
message out); what comes back is tidied into git's shape (a summary line, an optional
body) and only ever shown for editing: nothing commits without the user's say.
"""

from __future__ import annotations

import re

from app.core.events import Error, TextDelta
from app.core.provider import Provider, Request

COMMIT_RULES = """\
You write git commit messages. Given a staged diff, answer with the commit message only:
a summary line of at most 72 characters in the imperative mood ("Add", "Fix"), then, only
if it helps, a blank line and a short body saying why. No quotes, no code fences."""


def request(staged_diff: str, limit: int = 16_000) -> list[dict[str, str]]:
    """The short request for a commit message proposal (the diff cut to `limit` characters)."""
    diff = staged_diff if len(staged_diff) <= limit else staged_diff[:limit] + "\n[… diff cut]"
    return [{"role": "system", "content": COMMIT_RULES},
            {"role": "user", "content": f"Staged changes:\n\n{diff}"}]


SUMMARY_MAX = 72


class ProposalFailed(RuntimeError):
    """The back-end could not propose a message (the reason is its own)."""


async def propose(provider: Provider, staged_diff: str) -> str:
    if not staged_diff.strip():
        raise ProposalFailed("nothing is staged")
    req = Request(request(staged_diff), model=provider.model, max_tokens=160,
                  temperature=0.2)
    parts: list[str] = []
    async for ev in provider.stream(req):
        if type(ev) is TextDelta:
            parts.append(ev.text)
        elif type(ev) is Error:
            raise ProposalFailed(ev.message)
    message = tidy("".join(parts))
    if not message:
        raise ProposalFailed("the model proposed an empty message")
    return message


_PREFIX = re.compile(r"^(commit message|message|summary)\s*:\s*", re.IGNORECASE)


def tidy(text: str) -> str:
    """Fences, quotes and "Commit message:" labels off; a summary line of at most 72
    characters; a body (if any) after one blank line."""
    lines = [t.rstrip() for t in text.strip().splitlines() if not t.strip().startswith("```")]
    while lines and not lines[0].strip():
        lines.pop(0)
    if not lines:
        return ""
    summary = _PREFIX.sub("", lines[0].strip()).strip("\"'`").strip()
    if len(summary) > SUMMARY_MAX:
        cut = summary[: SUMMARY_MAX + 1].rsplit(" ", 1)[0]
        summary = (cut if len(cut) > SUMMARY_MAX // 2 else summary[:SUMMARY_MAX]).rstrip(" ,;:")
    body = "\n".join(lines[1:]).strip().strip("\"'").strip()
    return f"{summary}\n\n{body}" if body else summary
