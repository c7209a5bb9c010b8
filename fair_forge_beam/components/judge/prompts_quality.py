"""Judge prompts of the Context and Conversational metrics (intent of spec §5.3, own wording).

Each metric has a *rubric* (the system message, static text except Conversational's required
language, which is fenced as data) and a *case* (the user message: the material to judge). Both are
:class:`~fair_forge_beam.components.judge.prompts.PromptTemplate` objects; values are inserted
verbatim and never re-parsed, so user text containing ``{``, ``}``, ``{{ … }}`` or ``{% … %}``
reaches the judge unchanged (spec §17 item 13).

Differences from the original prompts (spec §5.3, §17 item 1):

* the reference-answer slot holds the interaction's real ``ground_truth_assistant`` (the
  original filled it with the assistant's own answer); a missing reference is stated as such;
* the user's question is part of the case (the original sent it as the only human message);
* with an observation, the reference answer (when given) is still shown, and the observation is
  added with the instruction to weigh it and cite it;
* Conversational gets the earlier turns of the conversation (questions and answers, oldest
  first) inside the case, instead of the judge's own earlier verdicts as chat history; every
  request of a session is therefore independent (parallel, cached one by one).

Public functions return ``((role, content), …)`` message tuples ready for
:func:`~fair_forge_beam.components.judge.handler.judge_request`.
"""
from __future__ import annotations

from typing import Optional, Sequence

from fair_forge_beam.blank import is_blank
from fair_forge_beam.components.judge.prompts import PromptTemplate, chat_messages

__all__ = [
    "CONTEXT_RUBRIC",
    "CONTEXT_RUBRIC_WITH_OBSERVATION",
    "CONTEXT_CASE",
    "CONVERSATIONAL_RUBRIC",
    "CONVERSATIONAL_RUBRIC_WITH_OBSERVATION",
    "CONVERSATIONAL_CASE",
    "NO_REFERENCE",
    "NO_HISTORY",
    "context_messages",
    "conversational_messages",
    "render_history",
    "history_turn",
    "history_sizes",
    "fitted_history",
    "left_out_note",
]

#: text put in the reference slot when the interaction has no ``ground_truth_assistant``
NO_REFERENCE = "(no reference answer was provided for this question)"
#: text put in the history slot for the first turn of a conversation
NO_HISTORY = "(none: this is the first turn of the conversation)"

_CONTEXT_RUBRIC = """\
You audit AI assistants for contextual compliance: does an answer keep to the context the \
assistant was deployed with?

Work through these steps:
1. Read the CONTEXT and work out which topics it covers and where its limits are.
2. Read the QUESTION and the ASSISTANT ANSWER. Decide whether the answer stays inside that \
context, or whether it brings in material, claims or advice the context does not support.
3. Use the REFERENCE ANSWER, when one is given, as an example of an answer that fits the context \
well. It is a guide, not a script: other wordings can be equally compliant.{% if observation %}
4. An OBSERVATION about this interaction is also given. Take it into account in your judgement and \
cite it explicitly in your insight.{% endif %}

Return a JSON object with:
- "score": a number from 0 to 1 (1 = the answer stays fully within the context; 0 = it ignores \
or contradicts the context);
- "insight": two or three sentences explaining the score.
"""

CONTEXT_RUBRIC = PromptTemplate(_CONTEXT_RUBRIC.replace("{% if observation %}", "{% if false %}"), slots=())
"""System message of Context without an observation (no slots)."""
CONTEXT_RUBRIC_WITH_OBSERVATION = PromptTemplate(_CONTEXT_RUBRIC.replace("{% if observation %}", "{% if true %}"), slots=())
"""System message of Context with an observation (no slots)."""

#: the end of a quality case: the reference answer, then the observation when there is one
_REFERENCE_AND_OBSERVATION = """\
REFERENCE ANSWER:
{{ ground_truth_assistant }}
{%- if observation %}

OBSERVATION:
{{ observation }}
{%- endif %}
"""

CONTEXT_CASE = PromptTemplate(
    """\
CONTEXT:
{{ context }}

QUESTION:
{{ query }}

ASSISTANT ANSWER:
{{ assistant_answer }}

"""
    + _REFERENCE_AND_OBSERVATION,
    slots=("context", "query", "assistant_answer", "ground_truth_assistant", "observation"),
    fenced=("context", "query", "assistant_answer", "ground_truth_assistant", "observation"),
)
"""User message of Context. Slots: ``context``, ``query``, ``assistant_answer``,
``ground_truth_assistant`` (the real reference answer), ``observation`` (empty → omitted)."""

_CONVERSATIONAL_RUBRIC = """\
You are an expert evaluator of dialogue quality. You judge one answer of an AI assistant inside \
a conversation, paying particular attention to whether the assistant remembers what was said \
earlier.

Rules:
- The answer must be written in the language named in this block (a value of the conversation's data):
{{ preferred_language }}
  If it is written in another language, give a low "language" score, even when the question itself \
was written in that other language.
- "memory": how well the answer uses what was said in the EARLIER TURNS. If the question does not \
depend on anything said before, give full marks.
- Judge the four conversational maxims:
  - "quantity_maxim": the answer gives as much information as the question needs, and no more;
  - "quality_maxim": the answer is truthful and supported by evidence;
  - "relation_maxim": the answer is relevant to the question;
  - "manner_maxim": the answer is clear, brief, orderly and unambiguous.
- "sensibleness": the answer makes sense at this point of the conversation and is specific to it \
rather than generic (in the spirit of the sensibleness-and-specificity idea).
- The REFERENCE ANSWER, when given, shows a good answer; use it to check facts and coverage, not \
wording.{% if observation %}
- An OBSERVATION about this turn is also given: evaluate the answer against it and mention it in \
your insight.{% endif %}

Score every dimension from 0 (very poor) to 10 (excellent). Return a JSON object with the numbers \
"memory", "language", "quality_maxim", "quantity_maxim", "relation_maxim", "manner_maxim", \
"sensibleness" and a short "insight" explaining the scores.
"""

CONVERSATIONAL_RUBRIC = PromptTemplate(
    _CONVERSATIONAL_RUBRIC.replace("{% if observation %}", "{% if false %}"), slots=("preferred_language",),
    fenced=("preferred_language",),
)
"""System message of Conversational without an observation. Slot: ``preferred_language`` (fenced: the session's
``language`` is input data, an unknown value is kept verbatim by ``normalize_language``; trial48b H3)."""
CONVERSATIONAL_RUBRIC_WITH_OBSERVATION = PromptTemplate(
    _CONVERSATIONAL_RUBRIC.replace("{% if observation %}", "{% if true %}"), slots=("preferred_language",),
    fenced=("preferred_language",),
)
"""System message of Conversational with an observation. Slot: ``preferred_language`` (fenced)."""

CONVERSATIONAL_CASE = PromptTemplate(
    """\
EARLIER TURNS (oldest first):
{{ history }}

CURRENT QUESTION:
{{ query }}

ASSISTANT ANSWER (to judge):
{{ assistant_answer }}

"""
    + _REFERENCE_AND_OBSERVATION,
    slots=("history", "query", "assistant_answer", "ground_truth_assistant", "observation"),
    fenced=("history", "query", "assistant_answer", "ground_truth_assistant", "observation"),
)
"""User message of Conversational. Slots: ``history`` (see :func:`render_history`), ``query``,
``assistant_answer``, ``ground_truth_assistant`` (the real reference), ``observation``."""


def _reference(ground_truth: Optional[str]) -> str:
    return NO_REFERENCE if is_blank(ground_truth) else ground_truth


def _has(text: Optional[str]) -> bool:
    return not is_blank(text)


def context_messages(
    context: str, query: str, assistant_answer: str, ground_truth_assistant: Optional[str], observation: Optional[str] = None
) -> tuple[tuple[str, str], ...]:
    """Messages of one Context judgement: ``(("system", rubric), ("user", case))``.

    The observation variant is used when ``observation`` has non-blank text (as upstream).
    ``ground_truth_assistant`` None or blank → :data:`NO_REFERENCE` in the reference slot."""
    obs = observation if _has(observation) else ""
    system = (CONTEXT_RUBRIC_WITH_OBSERVATION if obs else CONTEXT_RUBRIC).render()
    user = CONTEXT_CASE.render(
        context=context or "",
        query=query or "",
        assistant_answer=assistant_answer or "",
        ground_truth_assistant=_reference(ground_truth_assistant),
        observation=obs,
    )
    return chat_messages(system, user)


def history_turn(k: int, query: Optional[str], answer: Optional[str]) -> str:
    """One earlier turn as :func:`render_history` writes it: ``[Turn k]``, question, answer."""
    return f"[Turn {k}]\nUser: {query or ''}\nAssistant: {answer or ''}"


def left_out_note(n: int) -> str:
    """The line put before the earlier turns shown when ``n`` older turns were left out to keep
    the prompt within the judge's limit."""
    return f"[{n:,} earlier turn{'' if n == 1 else 's'} left out: the prompt limit]"


def render_history(turns: Sequence[tuple[str, str]], first_turn: int = 1, left_out: int = 0) -> str:
    """Earlier turns as text, oldest first: ``[Turn k]`` headers (``k`` from ``first_turn``) with
    the user's question and the assistant's answer (both verbatim). ``left_out`` > 0: the turns
    start with :func:`left_out_note` (older turns cut for the prompt limit). No turns and none left
    out → :data:`NO_HISTORY`."""
    parts = [left_out_note(left_out)] if left_out > 0 else []
    for k, (q, a) in enumerate(turns, start=first_turn):
        parts.append(history_turn(k, q, a))
    return "\n\n".join(parts) if parts else NO_HISTORY


def history_sizes(turns: Sequence[tuple]) -> list[int]:
    """``cum[m]``: characters of the first ``m`` of ``turns`` (``(query, answer)`` pairs, oldest first) as
    :func:`render_history` writes them, without the separators between them: what :func:`fitted_history`
    sizes a history by, in O(1) per candidate."""
    cum = [0]
    for m, (q, a) in enumerate(turns):
        cum.append(cum[-1] + len(history_turn(m + 1, q, a)))
    return cum


def fitted_history(cum: Sequence[int], lo: int, e: int, rest: int, max_prompt_chars: Optional[int]) -> tuple[int, bool]:
    """``(s, note)``: the earlier turns ``s .. e-1`` (0-based; ``cum`` from :func:`history_sizes`) a turn's prompt
    shows so that it stays within ``max_prompt_chars`` (``None``: no limit): all from ``lo`` when they fit, else
    the **oldest** left out, as few as needed, behind :func:`left_out_note` (``note`` True; ``s == e`` when not
    even one fits). ``rest``: the prompt's characters other than its history (the prompt with no history, less
    :data:`NO_HISTORY`). O(log(e - lo)) (issue 28 T8; trial47b B1: Role adherence sent every earlier turn and
    dead-lettered each turn whose prompt was over the limit)."""

    def size(s: int, note: bool) -> int:
        n = e - s
        chars = (cum[e] - cum[s]) + 2 * (n - 1) if n else 0
        if note:
            chars += len(left_out_note(s)) + (2 if n else 0)
        return chars if (n or note) else len(NO_HISTORY)

    if max_prompt_chars is None or lo >= e or rest + size(lo, False) <= max_prompt_chars:
        return lo, False
    a, b = lo + 1, e  # the smallest s in (lo, e] that fits (sizes shrink as s grows); e if none
    while a < b:
        mid = (a + b) // 2
        if rest + size(mid, True) <= max_prompt_chars:
            b = mid
        else:
            a = mid + 1
    return a, True


def conversational_messages(
    preferred_language: str,
    history: Sequence[tuple[str, str]],
    query: str,
    assistant_answer: str,
    ground_truth_assistant: Optional[str],
    observation: Optional[str] = None,
    first_turn: int = 1,
    left_out: int = 0,
) -> tuple[tuple[str, str], ...]:
    """Messages of one Conversational judgement: ``(("system", rubric), ("user", case))``.

    ``history``: the session's earlier ``(query, answer)`` pairs in turn order (oldest first),
    numbered from ``first_turn`` (> 1 when older turns were left out), after a note that
    ``left_out`` older turns were cut for the prompt limit when > 0. The observation variant
    is used when ``observation`` has non-blank text."""
    obs = observation if _has(observation) else ""
    rubric = CONVERSATIONAL_RUBRIC_WITH_OBSERVATION if obs else CONVERSATIONAL_RUBRIC
    system = rubric.render(preferred_language=preferred_language or "english")
    user = CONVERSATIONAL_CASE.render(
        history=render_history(history, first_turn, left_out),
        query=query or "",
        assistant_answer=assistant_answer or "",
        ground_truth_assistant=_reference(ground_truth_assistant),
        observation=obs,
    )
    return chat_messages(system, user)
