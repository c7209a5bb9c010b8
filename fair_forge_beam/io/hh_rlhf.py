"""Anthropic hh-rlhf preference pairs as sessions with two assistants (for BestOf and others).

Each JSONL record ``{"chosen": transcript, "rejected": transcript}`` (transcripts in the
``"\\n\\nHuman: …\\n\\nAssistant: …"`` format, optionally gzip-compressed) becomes **one**
``session_id`` (``hh-<record number, 5 digits>``) answered by two assistants, ``chosen`` and
``rejected``: each Human turn and the Assistant text after it form one interaction
(``qa_id`` ``q00``, ``q01``, …; consecutive Assistant segments are joined by a blank line; a
Human turn without a reply gets an empty answer). The two transcripts share every turn but
the last, so a BestOf block compares the final answers in their shared context. No reference
answers (``ground_truth_assistant`` None).

A record that cannot be parsed (not JSON, a transcript missing or without a Human turn, or with
text or an Assistant turn before its first Human turn, which no turn would hold) is
skipped and counted in :attr:`HHRLHFPairs.skipped` with its reason — the pipeline's reader
only sees valid sessions. Source: anthropics/hh-rlhf (MIT).
"""
from __future__ import annotations

import re
from typing import Any, Optional

from fair_forge_beam.io import edge
from fair_forge_beam.io.retriever import Retriever
from fair_forge_beam.schemas.common import IterationLevel
from fair_forge_beam.plain import plain_reason
from fair_forge_beam.quoting import quoted

__all__ = ["HHRLHFPairs", "parse_transcript", "hh_rlhf_sessions"]

_MARK = re.compile(r"\n\n(Human|Assistant): ")


def parse_transcript(text: str) -> list[tuple[str, str]]:
    """``[(human text, assistant text), …]`` of one transcript.

    Raises ``ValueError`` when the text is not a string, has no Human turn, or has text or an
    Assistant turn before the first Human turn (it would be left out of the mapped turns)."""
    if not isinstance(text, str):
        raise ValueError(f"transcript must be text, got {type(text).__name__}")
    parts = _MARK.split("\n\n" + text.lstrip("\n") if not text.startswith("\n\n") else text)
    # parts = [prefix, role, text, role, text, ...]
    if parts[0].strip():  # never left out: text before the first turn belongs to none
        raise ValueError(f"text before the first 'Human:' turn ({quoted(parts[0].strip(), 40)}): it belongs to no turn")
    turns: list[list[str]] = []
    for role, body in zip(parts[1::2], parts[2::2]):
        body = body.strip()
        if role == "Human":
            turns.append([body, ""])
        elif turns:
            turns[-1][1] = f"{turns[-1][1]}\n\n{body}" if turns[-1][1] else body
        else:
            raise ValueError("an 'Assistant:' turn before the first 'Human:' turn: it answers no query")
    if not turns:
        raise ValueError("no 'Human:' turn in the transcript")
    return [(q, a) for q, a in turns]


def hh_rlhf_sessions(path: str, limit: Optional[int] = None, skipped: Optional[list] = None,
                     max_record_bytes: Optional[int] = None) -> list[dict[str, Any]]:
    """Sessions (dicts in the ``Dataset`` shape) of the first ``limit`` records of ``path`` (any
    compression :func:`~fair_forge_beam.io.edge.open_input` reads), read line by line in bounded
    pieces (:func:`~fair_forge_beam.io.read.bounded_lines`): a line over ``max_record_bytes``
    (default: ``--max-record-bytes``'s, :data:`~fair_forge_beam.io.read.MAX_RECORD_BYTES`) is never held whole.

    Unparseable records and lines over the limit are left out and, when ``skipped`` is a list,
    appended to it as ``(record number, reason)``. Raises ``OSError`` when the file cannot be read."""
    from fair_forge_beam.io.read import MAX_RECORD_BYTES, ReadError, bounded_lines

    max_record_bytes = MAX_RECORD_BYTES if max_record_bytes is None else int(max_record_bytes)
    out: list[dict[str, Any]] = []
    edge.refuse_damaged(str(path))  # checked whole first: a ``limit`` may stop before a gzip CRC
    with edge.open_input(str(path)) as fh:
        for i, (_, line) in enumerate(bounded_lines(fh, max_record_bytes)):
            if limit is not None and i >= limit:
                break
            try:
                if isinstance(line, ReadError):
                    raise ValueError(line.reason)
                rec = edge.loads(line.decode("utf-8"))  # strict: a repeated key is a skipped line, not last-wins
                pair = {v: parse_transcript(rec[v]) for v in ("chosen", "rejected")}
            except (ValueError, KeyError, TypeError) as exc:
                if skipped is not None:
                    skipped.append((i, plain_reason(exc)))
                continue
            for variant, turns in pair.items():
                out.append({
                    "session_id": f"hh-{i:05d}", "assistant_id": variant, "language": "english", "context": "",
                    "conversation": [{"qa_id": f"q{k:02d}", "query": q, "assistant": a, "ground_truth_assistant": None}
                                     for k, (q, a) in enumerate(turns)],
                })
    return out


class HHRLHFPairs(Retriever):
    """Retriever of hh-rlhf pairs: ``HHRLHFPairs(path=..., limit=None, max_record_bytes=None)``
    (full-dataset level; ``None``: the default record limit).

    ``load_dataset()`` returns the session dicts of :func:`hh_rlhf_sessions`; ``skipped`` lists
    ``(record number, reason)`` of the records left out."""

    @property
    def iteration_level(self) -> IterationLevel:
        return IterationLevel.FULL_DATASET

    def load_dataset(self):
        self.skipped: list = []
        return hh_rlhf_sessions(self.kwargs["path"], self.kwargs.get("limit"), self.skipped,
                                self.kwargs.get("max_record_bytes"))
