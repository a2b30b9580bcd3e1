"""What each edit format costs to reach an exact result, as measured: the data behind the
choice of format (app/core/edits/formats/__init__.py `choose`).

Cost = the answer tokens a format spends for a change, divided by how often such an answer
applies exactly: tokens to an exact result. Measured by `steer bench task` (24 tasks on files
of 9-17 lines made from the standard library: a docstring, a renamed local, a return type
hint, a typo; see app/bench/task.py) on this project's machine:

- answer tokens: the scripted server's answers, as a capable model writes each format (a
  whole file costs its lines; search/replace and apply_patch a block around the change);
- exact-apply rates: `capable` from the scripted answers (steer applies every well-formed
  answer exactly, so the format's own rate is 1.0), `tiny` from the embedded SmolLM2-135M
  (greedy decoding, the prompts steer sends: each record's rules).

A back-end declares which rate describes its model (Capabilities.model_class) and, when its
model is trained on one format, that format (Capabilities.preferred_format); other formats
then count with TRAINED_ELSEWHERE of the rate, an estimate, not a measurement.

The measured numbers are in each format's record (`Cost`, in the format's module: whole.py,
search_replace.py, apply_patch.py); this module prices a record with them.
"""

from __future__ import annotations

from app.core.edits.formats.record import Cost, Format

MEASURED = "2026-11-23, steer bench task, 24 tasks, both back-ends"  # the records' Cost

TRAINED_ELSEWHERE = 0.6  # a model trained on another format applies this one this often (estimate)


def _measured(fmt: Format) -> Cost:
    if fmt.cost is None:
        raise ValueError(f"{fmt.name} has no measured cost: it is never chosen by cost")
    return fmt.cost


def answer_tokens(fmt: Format, file_lines: list[int]) -> float:
    c = _measured(fmt)
    if fmt.whole_file:  # every line of every file
        return sum(c.fixed + c.per_line * n for n in file_lines) if file_lines else c.fixed
    return c.fixed * max(1, len(file_lines))  # a block per file (one change each)


def exact_rate(fmt: Format, model_class: str, preferred: str | None) -> float:
    exact = _measured(fmt).exact
    rate = exact.get(model_class, exact["capable"])
    if preferred and preferred != fmt.name and model_class != "tiny":
        rate *= TRAINED_ELSEWHERE
    return rate


def cost(fmt: Format, file_lines: list[int], model_class: str, preferred: str | None) -> float:
    """Expected answer tokens to an exact result (inf when the format never applies)."""
    rate = exact_rate(fmt, model_class, preferred)
    return answer_tokens(fmt, file_lines) / rate if rate > 0 else float("inf")
