"""Judge prompt of the Agentic metric's answer correctness (intent of spec §5.3, own wording).

A strict grader compares the agent's final answer with the reference answer: factual accuracy
first, then exact spelling of names and figures, completeness, and format, on the banded 0–1
scale of the original rubric. Values are inserted verbatim (never re-templated, see
:mod:`~fair_forge_beam.components.judge.prompts`); the question is part of the case.
"""
from __future__ import annotations

from fair_forge_beam.components.judge.prompts import PromptTemplate, chat_messages

__all__ = ["AGENTIC_RUBRIC", "AGENTIC_CASE", "agentic_messages"]

AGENTIC_RUBRIC = PromptTemplate(
    """\
You grade the final answers of AI agents. Compare the AGENT ANSWER with the REFERENCE ANSWER \
for the QUESTION and decide how correct the agent's answer is.

Judge in this order of importance: (1) are the facts right; (2) are names, numbers and other \
exact values spelled exactly; (3) is anything the reference contains missing; (4) is the format \
appropriate. Wording may differ freely when the meaning is the same.

Score bands (a number from 0 to 1):
- 1.0: the same answer, or a faithful paraphrase of it.
- 0.85 to 0.95: correct, but wordier than needed.
- 0.65 to 0.75: the right fact with a spelling slip; one slip scores at most 0.75, several at most 0.5.
- 0.5 to 0.65: mostly right, some details missing.
- 0.3 to 0.5: partly right.
- below 0.3: wrong.

Example: for "What is the capital of France?" with reference "Paris", the answer "The capital \
of France is Paris." scores 1.0, "Pariss" about 0.7, and "Lyon" below 0.3.

Return a JSON object with "correctness_score" (the number) and "reasoning" (one or two sentences).
""",
    slots=(),
)
"""System message (no slots)."""

AGENTIC_CASE = PromptTemplate(
    """\
QUESTION:
{{ query }}

AGENT ANSWER:
{{ answer }}

REFERENCE ANSWER:
{{ ground_truth }}
""",
    slots=("query", "answer", "ground_truth"),
    fenced=("query", "answer", "ground_truth"),
)
"""User message. Slots: ``query``, ``answer``, ``ground_truth``."""


def agentic_messages(query: str, answer: str, ground_truth: str) -> tuple[tuple[str, str], ...]:
    """Messages of one correctness judgement: ``(("system", rubric), ("user", case))``."""
    return chat_messages(AGENTIC_RUBRIC.render(), AGENTIC_CASE.render(query=query or "", answer=answer or "", ground_truth=ground_truth))
