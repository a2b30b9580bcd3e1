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
  (greedy decoding, the prompts of app/core/conversation/prompts.py).

A back-end declares which row describes its model (Capabilities.model_class) and, when its
model is trained on one format, that format (Capabilities.preferred_format); other formats
then count with TRAINED_ELSEWHERE of the rate, an estimate, not a measurement.
"""

from __future__ import annotations

MEASURED = "2026-11-23, steer bench task, 24 tasks, both back-ends"

# answer tokens = fixed + per_file_line * lines of the file (whole) or per change (the others)
ANSWER_TOKENS: dict[str, tuple[float, float]] = {
    "whole": (17.0, 9.2),  # prose, path, fences + every line of the file
    "search_replace": (77.3, 0.0),  # per change: path, markers, the lines around it twice
    "apply_patch": (110.0, 0.0),  # per change: header, three lines of context each side
}

EXACT_RATE: dict[str, dict[str, float]] = {
    "capable": {"whole": 1.0, "search_replace": 1.0, "apply_patch": 1.0},
    # SmolLM2-135M: 0 of 24 exact in every format (an earlier 6-task run gave whole 3 of 6);
    # whole is still what it writes at all (97 answer tokens a task, against 254 and 223)
    "tiny": {"whole": 0.0, "search_replace": 0.0, "apply_patch": 0.0},
}

TRAINED_ELSEWHERE = 0.6  # a model trained on another format applies this one this often (estimate)


def answer_tokens(fmt: str, file_lines: list[int]) -> float:
    fixed, per_line = ANSWER_TOKENS[fmt]
    if fmt == "whole":
        return sum(fixed + per_line * n for n in file_lines) if file_lines else fixed
    return fixed * max(1, len(file_lines))


def exact_rate(fmt: str, model_class: str, preferred: str | None) -> float:
    rate = EXACT_RATE.get(model_class, EXACT_RATE["capable"])[fmt]
    if preferred and preferred != fmt and model_class != "tiny":
        rate *= TRAINED_ELSEWHERE
    return rate


def cost(fmt: str, file_lines: list[int], model_class: str, preferred: str | None) -> float:
    """Expected answer tokens to an exact result (inf when the format never applies)."""
    rate = exact_rate(fmt, model_class, preferred)
    return answer_tokens(fmt, file_lines) / rate if rate > 0 else float("inf")
