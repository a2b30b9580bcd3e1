"""What the model is told: the edit format's rules, the files in context, the instruction,
and (when steering) where it was interrupted and what the user decided since; and what a
request carries besides, for the back-ends that can use it (prefill, prediction, grammar).
What a format means here (its rules, whether its answer is the whole file) is asked of its
record (app/core/edits/formats)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import PurePosixPath

from app.core.disk.snapshot import Snapshot
from app.core.edits import formats
from app.core.edits.hunks import Hunk, HunkState
from app.core.provider import Capabilities, Request
from app.core.text.names import carried, wire


def system_prompt(fmt: str) -> str:
    """The rules of the format `fmt` (its record's); a name with none of its own ("auto"
    before a format is chosen, an agent's budget): the longest, to be safe."""
    rec = formats.find(fmt)
    return rec.rules if rec is not None and rec.rules else formats.longest_rules()


def fence_lang(path: str) -> str:
    ext = PurePosixPath(path).suffix.lstrip(".").lower()
    return {"py": "python", "js": "javascript", "ts": "typescript", "rs": "rust", "md": "markdown",
            "sh": "bash", "yml": "yaml", "rb": "ruby", "kt": "kotlin", "h": "c", "hpp": "cpp",
            "cc": "cpp"}.get(ext, ext)


def render_file(snap: Snapshot, outline: list[str] | None = None) -> str:
    path = carried(snap.path)  # a name that is not plain text goes escaped (text/names.py)
    if outline is not None:  # too big to send whole: its definitions, with line numbers
        return (f"{path} (outline only: {len(outline)} of its {len(snap.lines)} lines; ask "
                "for a part you need to see)\n" + "\n".join(outline))
    body = "\n".join(snap.lines)
    fence = "````" if "```" in body else "```"
    return f"{path}\n{fence}{fence_lang(snap.path)}\n{body}\n{fence}" if snap.lines else (
        f"{path}\n(empty file)" if snap.exists else f"{path}\n(does not exist yet)")


REJECTIONS_KEPT = 20  # earlier rejections a new change set is reminded of


def first_message(instruction: str, files: Sequence[Snapshot],
                  outlines: dict[str, list[str]] | None = None, *, rejected: Sequence[str] = (),
                  interrupted: bool = False) -> str:
    """The first request of a change set: the files, what the user rejected earlier in this
    session (and why), and the instruction. `interrupted`: the conversation goes on after
    an answer the user cut short."""
    outlines = outlines or {}
    parts = [render_file(s, outlines.get(s.path)) for s in files]
    if rejected:
        parts.append("Earlier in this session I rejected these proposals; do not propose them "
                     "again:\n" + "\n".join(rejected))
    if interrupted:
        parts.append("I interrupted your previous answer; it stays above as far as it got.")
    parts.append(instruction)
    return "\n\n".join(parts)


def pick_format(caps: Capabilities, model: str, fmt: str, files: Sequence[Snapshot]
                ) -> tuple[str, str]:
    """A new question's edit format and why that one. `fmt` is the format asked for, or
    "auto": the cheapest for these files and this model (app/core/edits/formats/costs.py)."""
    choice = formats.pick(caps, model, fmt, [len(s.lines) for s in files])
    return choice.fmt, choice.reason


def next_message(instruction: str, changed: Sequence[Snapshot], outlines: dict[str, list[str]],
                 *, decided: str = "", rules: str | None = None, interrupted: bool = False) -> str:
    """A new change set in a conversation that goes on: only what is new since the model's
    last message, appended (the conversation before it is sent unchanged, so the request
    continues the last one): the context files it has not seen as they are now, the user's
    decisions on its last edits it was not told yet, the rules of another edit format, then
    the instruction."""
    parts = []
    if changed:
        parts.append("These files changed since you last saw them, or are new here; this is "
                     "how they are now:\n\n"
                     + "\n\n".join(render_file(s, outlines.get(s.path)) for s in changed))
    if decided:
        parts.append("My decisions on your last edits:\n" + decided)
    if rules:
        parts.append("For this change, write your edits in this format instead:\n\n" + rules)
    if interrupted:
        parts.append("I interrupted your previous answer; it stays above as far as it got.")
    parts.append(instruction)
    return "\n\n".join(parts)


def request(messages: list[dict], caps: Capabilities, model: str, fmt: str,
            files: Sequence[Snapshot], *, first: bool, prefill: str, max_tokens: int | None,
            temperature: float | None, context: list[str],
            tools: tuple[list[dict] | None, int] = (None, 0)) -> Request:
    """What a turn sends: its messages, and what this back-end can make of the files and
    the format (`first`: a new question, not a redirect or a follow-up)."""
    # a whole-file answer mostly repeats the files: a back-end with predicted outputs gets
    # them as the prediction (it streams the unchanged parts at once)
    predictable = caps.predicted_outputs and first and formats.get(fmt).predictable
    predicted = prediction(files) if predictable else None
    # a grammar-constrained back-end (llama.cpp) is held to the format's shape (a first
    # answer: a redirect or follow-up continues where the grammar would not fit)
    shape = grammar(fmt, files) if caps.grammar and caps.prefill and first else None
    if max_tokens is None and caps.model_class == "tiny":
        max_tokens = answer_budget(files)
    offered, rounds = tools if caps.tools else (None, 0)  # look-ups: only where it can call
    return Request(messages, model=model, max_tokens=max_tokens, temperature=temperature,
                   prefill=prefill, prediction=predicted, grammar=shape, context=context,
                   tools=offered, tool_rounds=rounds)


def _where(h: Hunk) -> str:
    return f"{carried(h.path)} line {h.base_start + 1}" + (
        f"-{h.base_end}" if h.base_end > h.base_start + 1 else "")


def _gist(lines: Sequence[str], limit: int = 80) -> str:
    text = " ⏎ ".join(t.strip() for t in lines if t.strip())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def rejected_lines(hunks: Iterable[Hunk]) -> list[str]:
    """One line per rejected hunk: where, what it proposed, and the user's reason."""
    out = []
    for h in hunks:
        if h.state != HunkState.REJECTED:
            continue
        what = f"`{_gist(h.new)}`" if h.new else f"deleting `{_gist(h.old)}`"
        why = f" (reason: {h.reason})" if h.reason else ""
        out.append(f"- {_where(h)}: {what}{why}")
    return out


def prediction(files: Sequence[Snapshot]) -> str | None:
    """What a whole-file answer is expected to be, for predicted outputs: each file as the
    prompt shows it (path, fenced content), which is how the answer writes it back."""
    shown = [render_file(s) for s in files if s.lines]
    return "\n\n".join(shown) + "\n" if shown else None


# a line of a file inside a ``` block: anything but a line opening with ``` (which closes it)
_GBNF_LINE = ('line ::= ([^`\\n] [^\\n]*)? "\\n" | "`" ([^`\\n] [^\\n]*)? "\\n" '
              '| "``" ([^`\\n] [^\\n]*)? "\\n"')


def grammar(fmt: str, files: Sequence[Snapshot]) -> str | None:
    """A GBNF grammar for the answer of a grammar-constrained back-end (the embedded model),
    after its prefill: for a whole file, the file's lines, the closing fence, and nothing
    after it: a tiny model's prose after the block is noise that costs half its tokens.
    (Holding the block open for most of the file's lines, so that it cannot stop after the
    lines it changed, was measured too: it made the model repeat itself to the token limit,
    and no more answers applied exactly.) None when no grammar applies."""
    if not formats.get(fmt).prefills_file or len(files) != 1 or not files[0].lines:
        return None
    if any(t.startswith("```") for t in files[0].lines):
        return None  # fenced with ````: a rarer shape, left free
    return f'root ::= line+ "```" "\\n"?\n{_GBNF_LINE}\n'


def answer_budget(files: Sequence[Snapshot]) -> int:
    """Tokens enough for an answer that rewrites the files once, with a few lines of prose:
    a cap for a tiny model, which may otherwise ramble on for minutes."""
    chars = sum(len(t) + 1 for s in files for t in s.lines)
    return 256 + chars // 2  # about two tokens for every four characters


def prefill(fmt: str, files: Sequence[Snapshot]) -> str:
    """Start the answer for models that need the nudge: with one file in context, a whole-
    file answer begins with its path and an opening fence."""
    if formats.get(fmt).prefills_file and len(files) == 1:
        return f"{carried(files[0].path)}\n```{fence_lang(files[0].path)}\n"
    return ""


def decisions(hunks: Iterable[Hunk]) -> str:
    """What the user decided on this change set: accepted hunks by place; rejected ones
    with what they proposed and the user's reason, so the model does not propose them again."""
    hunks = list(hunks)
    accepted = [_where(h) for h in hunks if h.state == HunkState.ACCEPTED]
    parts = []
    if accepted:
        parts.append(f"- accepted (already applied to the file): {', '.join(accepted)}")
    superseded = [_where(h) for h in hunks if h.state == HunkState.SUPERSEDED]
    if superseded:
        parts.append("- superseded (another variant's change was taken there instead): "
                     + ", ".join(superseded))
    rejected = rejected_lines(hunks)
    if rejected:
        parts.append("- rejected (do not propose again):\n" + "\n".join(
            "  " + line for line in rejected))
    return "\n".join(parts)


def steer_message(instruction: str, hunks: Iterable[Hunk], *, interrupted: bool) -> str:
    parts = []
    if interrupted:
        parts.append("I interrupted your answer above. Continue from where it stopped, "
                     "following this new instruction; do not repeat edits you already completed.")
    d = decisions(hunks)
    if d:
        parts.append("My decisions on your edits so far:\n" + d)
    parts.append(instruction)
    return wire("\n\n".join(parts))  # a native steer sends it as it is


def retry_message(errors: Sequence[tuple[str | None, str]], files: Sequence[Snapshot]) -> str:
    """Ask again for the edits that could not be applied, with the files as they are now."""
    lines = [f"- {carried(path) if path else '(no file named)'}: {why}" for path, why in errors]
    parts = ["These edits of yours could not be applied:", *lines]
    if files:
        parts.append("\nThe files as they are now:\n\n" + "\n\n".join(render_file(f) for f in files))
    parts.append("\nRedo exactly those edits against this text; leave the others as they are.")
    return "\n".join(parts)


FAILURE_CHARS = 3000  # of a failing check's output sent back (its end: where the failures are)


def check_failed(cmd: str, verdict: str, output: str) -> str:
    """The follow-up that sends a failing check back: what ran, what it said (its end, cut
    at a line), and what to do. Nothing was written: the check ran on a copy."""
    tail = output.strip("\n")
    if len(tail) > FAILURE_CHARS:
        cut = tail[-FAILURE_CHARS:]
        tail = "…\n" + cut[cut.find("\n") + 1:] if "\n" in cut else "…" + cut
    fence = "`" * max(3, 1 + max(map(len, re.findall(r"`+", tail)), default=0))
    return (f"I applied your whole proposal to a copy of the repository and ran `{cmd}`. It "
            f"failed ({verdict.removeprefix('✗ check: ')}); nothing was written to my files.\n\n"
            f"The end of its output:\n{fence}\n{tail}\n{fence}\n\n"
            "Fix your proposal: send only the edits that fix it, against the files as your "
            "proposal leaves them.")
