"""Chat models that continue text (pure): the continuation instruction, the conversation sent to
the model, and cleaning what it answers.

An instruction-tuned model fed a bare prompt answers it; asked to continue it, it often wraps the
continuation in a preamble ("Sure! Here is the continuation:"), a closing remark ("Let me know if
you want more."), a refusal or a comment about itself ("As an AI…"). `clean_reply` strips the
preamble and the closing remark (both recorded in the example's meta), and rejects refusals,
comments about itself, replies that start the prompt over, and replies with a preamble sentence
further in ("…the dark.\nCertainly. The…").
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from generation.sentences import split_sentences

INSTRUCTION_NAME = "roft-continue-v1"
INSTRUCTION = (
    "Continue the following text. Write the sentences that come next, as its author would: the "
    "same voice, tense, register and language. Reply with the continuation only. Do not repeat "
    "the text, and do not add a title, an introduction, a summary or any comment."
)

REFUSAL = "refusal"
META_COMMENT = "meta_comment"
RESTARTS_PROMPT = "restarts_prompt"
EMPTY_REPLY = "empty_reply"
STRAY_PREAMBLE = "stray_preamble"  # a sentence that is only "Certainly." or "Here's the …:"

# Openers that announce the answer rather than continue the text. Stripped repeatedly from the
# start ("Sure! Here's the continuation:" is two of them).
_OPENERS = [
    re.compile(r"(?:sure|certainly|of course|absolutely|okay|ok|alright|great)\b[!,.]+\s*", re.I),
    re.compile(
        r"(?:here(?:'s|’s| is| are)|below is|the following is)\b[^\n]{0,100}?"
        r"(?:continu|text|story|article|passage|rest|next|more)[^\n]{0,60}?(?::|\.|!|\n)\s*",
        re.I,
    ),
    re.compile(r"(?:continuation|continued|the continuation)\s*:\s*", re.I),
    # Any short first line ending in a colon that speaks about the task.
    re.compile(r"[^\n]{0,100}\b(?:continu\w*|story|article|text)\b[^\n]{0,40}:[ \t]*\n\s*", re.I),
]
_CLOSERS = re.compile(
    r"(?:\n+|(?<=[.!?…\"”’])\s+)(?:\(?note:|let me know\b|i hope (?:this|that|you)\b|"
    r"feel free\b|would you like\b|do you want\b|if you(?:'d| would) like\b)[^\n]*\s*$",
    re.I,
)
_REFUSALS = re.compile(
    r"\b(?:i(?:'m| am) (?:sorry|unable|not able)|i apologi[sz]e|i can(?:not|'t|’t) "
    r"(?:help|assist|continue|comply|do that|write)|i (?:won't|will not) (?:continue|write|help))",
    re.I,
)
_META = re.compile(
    r"\b(?:as an ai\b|as a language model\b|as an assistant\b|i(?:'m| am) an ai\b|"
    r"ai language model\b)",
    re.I,
)


def instruction_provenance() -> dict:
    """Name and SHA-256 of the instruction (its text is in docs/generation.md and the manifest)."""
    return {
        "name": INSTRUCTION_NAME,
        "sha256": hashlib.sha256(INSTRUCTION.encode("utf-8")).hexdigest(),
    }


def chat_messages(prompt: str) -> tuple[dict, ...]:
    """The conversation: one user turn, the instruction and then the human sentences."""
    return ({"role": "user", "content": f"{INSTRUCTION}\n\n{prompt}"},)


@dataclass(frozen=True)
class Cleaned:
    text: str  # the reply without preamble and closing remark
    preamble: str | None = None  # what was stripped from the start
    closing: str | None = None  # what was stripped from the end
    problem: str | None = None  # refusal, meta_comment, restarts_prompt, stray_preamble, …


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def clean_reply(reply: str, prompt: list[str], keep: int | None = None) -> Cleaned:
    """Strip the preamble and closing remark of a chat model's reply, and say why the rest cannot
    be used as a continuation of `prompt` (its sentences), if it cannot.

    With `keep`, only the first `keep` sentences (those a continuation uses) are judged for
    refusals, comments and stray preambles: what a model writes past them is never kept, and how
    much it writes depends on the engine (rows of a batch keep stepping; a server stops at
    max_tokens), so judging it would make the same reply pass on one engine and fail on another."""
    text, stripped = _strip_openers(reply)
    preamble = " ".join(stripped) or None
    closing = None
    found = _CLOSERS.search(text)
    if found:
        closing = found.group(0).strip()
        text = text[: found.start()].rstrip()
    text = text.strip()
    problem = None
    sentences = split_sentences(text)
    if keep is not None:
        sentences = sentences[:keep]
    judged = text if keep is None else " ".join(sentences)
    if not text:
        problem = EMPTY_REPLY
    elif _REFUSALS.search(judged[:300]) or (preamble and _REFUSALS.search(preamble)):
        problem = REFUSAL
    elif _META.search(judged) or (preamble and _META.search(preamble)):
        problem = META_COMMENT
    elif prompt and _restarts(text, prompt):
        problem = RESTARTS_PROMPT
    elif any(_is_preamble(sentence) for sentence in sentences):
        problem = STRAY_PREAMBLE
    return Cleaned(text=text, preamble=preamble, closing=closing, problem=problem)


_STRAY = re.compile(
    r"(?:sure|certainly|of course|absolutely|okay|ok|alright)\b[^\w]*(?:$|here\b)|"
    r"here(?:'s|’s| is| are) (?:the|a|my|your) (?:continu|rest\b|next part)",
    re.I,
)


# A sentence that opens like an assistant's announcement the openers could not strip ("Sure
# opened …", "Here's the dark."): a human text's sentence seldom starts so, and a false alarm
# costs only a retry, so the reply is retried rather than kept.
_GARBLED_OPENER = re.compile(r"(?:sure|certainly)\b(?![,!.])|here(?:'s|’s| is| are)\b", re.I)


def _is_preamble(sentence: str) -> bool:
    """A sentence that only announces (a stray "Certainly." or "Sure, here is …")."""
    sentence = sentence.strip()
    return (
        not _strip_openers(sentence + "\n")[0]
        or bool(_STRAY.match(sentence))
        or bool(_GARBLED_OPENER.match(sentence))
    )


def _strip_openers(text: str) -> tuple[str, list[str]]:
    """`text` without the openers it starts with, and the openers."""
    text = text.lstrip()
    stripped = []
    for _ in range(4):
        for opener in _OPENERS:
            found = opener.match(text)
            if found and found.end() > 0:
                stripped.append(found.group(0).strip())
                text = text[found.end() :].lstrip()
                break
        else:
            break
    return text, stripped


def _restarts(text: str, prompt: list[str]) -> bool:
    """The reply begins with the prompt's first sentence (or its first 60 characters)."""
    start = _norm(text)
    first = _norm(prompt[0])
    whole = _norm(" ".join(prompt))
    return start.startswith(first) or (len(whole) >= 60 and start.startswith(whole[:60]))
