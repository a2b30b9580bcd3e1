"""What the conversation pane says before the first message: how to ask, review and stop,
which model answers, and the one line that points steer at a real endpoint.

A first run lands on the tiny built-in model; the user must learn in one glance that it is a
toy and how to leave it, without reading the README. Plain data (label, then text spans with
a kind: "text", "key", "code"), so the terminal app draws it in its own styles and a test
reads it as text. The keys come in from the action table as bound now (a rebinding shows).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass

from app.config import PRESETS
from app.core.provider import Provider

Span = tuple[str, str]  # (text, kind): kind is "text", "key" or "code"
EXAMPLE = "cerebras"  # the preset the tiny model's screen names as the way out


@dataclass(frozen=True, slots=True)
class ModelFacts:
    """What the welcome needs of the back-end, from core's contract (never a providers
    module): its label, its name, and whether it is the tiny built-in model."""

    label: str  # "cerebras:gpt-oss-120b", "local:SmolLM2-135M-Instruct.Q4_1", "acp:codex-acp"
    tiny: bool  # capabilities.model_class == "tiny": the embedded SmolLM2-135M
    agent: bool = False

    @classmethod
    def of(cls, provider: Provider) -> ModelFacts:
        caps = provider.capabilities
        return cls(provider.label, caps.model_class == "tiny", caps.agent)


@dataclass(frozen=True, slots=True)
class Row:
    label: str  # "ask", "review", ...; "" for a blank line between groups
    spans: tuple[Span, ...] = ()

    @property
    def text(self) -> str:
        return "".join(t for t, _ in self.spans)


def _t(text: str) -> Span:
    return (text, "text")


def _k(text: str) -> Span:
    return (text, "key")


def _c(text: str) -> Span:
    return (text, "code")


def shown(text: str) -> str:
    """A name from outside (a model or agent name from the config or the command line) as
    plain marks: control and bidi characters become visible, never act."""
    return "".join(ch if unicodedata.category(ch)[0] != "C" else f"\\u{ord(ch):04x}" for ch in text)


def welcome(model: ModelFacts, keys: Mapping[str, str], config_file: str) -> list[Row]:
    """`keys`: action id -> its first key as shown ("Enter", "Tab", "y", "Esc")."""
    rows = [
        Row("ask", (_t("type an instruction, "), _k(keys.get("send", "Enter")),
                    _t(" sends it; "), _c("@path"), _t(" adds a file"))),
        Row("review", (_k(keys.get("queue", "Tab")), _t(" from an empty prompt goes to the "
                       "review; "), _k(keys.get("accept_hunk", "y")), _t(" accepts a hunk, "),
                       _k(keys.get("reject_hunk", "n")), _t(" rejects it"))),
        Row("stop", (_k(keys.get("interrupt", "Esc")), _t(" stops the model"))),
        Row(""),
    ]
    if model.tiny:
        preset = PRESETS[EXAMPLE]
        rows += [
            Row("model", (_t("SmolLM2-135M, built in: for trying steer, not for real work"),)),
            Row("switch", (_c(f"steer --provider {EXAMPLE}"), _t(" with "), _c(preset.key_env or ""),
                         _t(" set, or "), _c('base_url = "…"'), _t(" in "), _c(config_file))),
        ]
    elif model.agent:
        rows += [
            Row("agent", (_t(shown(model.label)),)),
            Row("switch", (_c('steer --agent "COMMAND"'), _t(" runs another; without "),
                           _c("--agent"), _t(", a model answers"))),
        ]
    else:
        rows += [
            Row("model", (_t(shown(model.label)),)),
            Row("switch", (_c("steer --provider NAME --model M"), _t(", or "),
                           _c('provider = "…"'), _t(" in "), _c(config_file))),
        ]
    return rows
